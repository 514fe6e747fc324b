package yarn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
)

// TestRMCallBoundedByRPCTimeout: a ResourceManager that accepts the
// connection and the call and never answers fails the call after
// ipc.client.rpc-timeout.ms, with an error that names the setting, even
// when the caller's context has no deadline.
func TestRMCallBoundedByRPCTimeout(t *testing.T) {
	addr, _ := nettest.Silent(t)
	hc := conf.HadoopConf{KeyRMAddress: addr, KeyRPCTimeout: "200"}
	guard, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rm, err := NewRMClient(guard, hc, Identity{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Close()
	done := make(chan error, 1)
	go func() {
		_, err := rm.ApplicationReport(context.Background(), ApplicationID{ClusterTimestamp: 1, ID: 1})
		done <- err
	}()
	select {
	case err = <-done:
	case <-guard.Done():
		t.Fatal("the call to a resource manager that never answers did not end")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), KeyRPCTimeout) {
		t.Fatalf("call to a silent resource manager: %v, want a deadline naming %s", err, KeyRPCTimeout)
	}
}

func TestRPCTimeoutSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"": defaultRPCTimeout, "0": 0, " 1500 ": 1500 * time.Millisecond} {
		got, err := rpcTimeout(conf.HadoopConf{KeyRPCTimeout: v})
		if err != nil || got != want {
			t.Errorf("%s=%q: %v %v, want %v", KeyRPCTimeout, v, got, err, want)
		}
	}
	for _, v := range []string{"-1", "2m", "99999999999999999999"} {
		if _, err := rpcTimeout(conf.HadoopConf{KeyRPCTimeout: v}); err == nil || !strings.Contains(err.Error(), KeyRPCTimeout) {
			t.Errorf("%s=%q: %v, want an error naming the setting", KeyRPCTimeout, v, err)
		}
	}
}
