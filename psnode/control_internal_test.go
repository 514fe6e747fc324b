package psnode

import (
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

// TestDeathOfAReplacedProcessIsIgnored: the scheduler's announcement of a
// process's death can arrive after the table update that brought the
// process replacing it; it must not be taken for the new one's death.
func TestDeathOfAReplacedProcessIsIgnored(t *testing.T) {
	cfg := conf.Default().PS
	cfg.NumServers, cfg.NumWorkers = 1, 1
	cfg.RootURI, cfg.RootPort, cfg.NodeHost = "scheduler", 1, "node"
	cfg.JobSecret = "job-secret"
	cfg.Role = conf.RoleServer
	n, err := New(cfg, mem.NewNetwork(1).NewTransport())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	events, stop := n.Subscribe()
	defer stop()
	id := transport.WorkerID(0)
	n.mu.Lock()
	n.table[id] = transport.Node{Role: transport.RoleWorker, ID: id, Incarnation: 2}
	n.mu.Unlock()

	n.markDeadOf(transport.Node{Role: transport.RoleWorker, ID: id, Incarnation: 1}, "the old process")
	if dead := n.DeadNodes(); len(dead) != 0 {
		t.Fatalf("dead nodes %v after the old process's death: the new one was taken for dead", dead)
	}
	n.markDeadOf(transport.Node{Role: transport.RoleWorker, ID: id, Incarnation: 2}, "the new process")
	if dead := n.DeadNodes(); len(dead) != 1 || dead[0] != id {
		t.Fatalf("dead nodes %v after the new process's death, want [%d]", dead, id)
	}
	// Events are delivered before markDeadOf returns.
	select {
	case ev := <-events:
		if ev.Kind != NodeDied || ev.Node.Incarnation != 2 {
			t.Fatalf("event %+v, want the death of incarnation 2 only", ev)
		}
	default:
		t.Fatal("no event for the new process's death")
	}
	select {
	case ev := <-events:
		t.Fatalf("a second event %+v", ev)
	default:
	}
}
