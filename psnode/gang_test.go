package psnode_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

// TestStartWaitsForTheWholeGang: with one worker of the job missing, no
// node's Start returns (so no task begins training) before its
// RegisterTimeout; the job's launcher derives that timeout from how long
// it may still be waiting for containers. (With every node there, Start
// returns: startCluster in every other test.)
func TestStartWaitsForTheWholeGang(t *testing.T) {
	net := mem.NewNetwork(3)
	base := baseConfig(1, 3)
	base.RegisterTimeout = 400 * time.Millisecond
	cfg := func(role conf.Role) conf.PS { p := base; p.Role = role; return p }
	nodes := []*psnode.Node{newNode(t, net, cfg(conf.RoleScheduler), "scheduler"), newNode(t, net, cfg(conf.RoleServer), "server0")}
	for i := 0; i < 2; i++ {
		nodes = append(nodes, newNode(t, net, cfg(conf.RoleWorker), fmt.Sprintf("worker%d", i)))
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	})
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Start(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("node %d started with a worker of the gang missing", i)
		}
	}
}
