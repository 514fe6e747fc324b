package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job"
)

// TestClusterStopAll starts processes that end on SIGTERM and ones that
// ignore it: StopAll leaves none, the stubborn ones killed after the
// grace period.
func TestClusterStopAll(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		{"ends on SIGTERM", `echo up; sleep 600 & wait`},
		{"ignores SIGTERM", `trap '' TERM; echo up; sleep 600 & wait; sleep 600 & wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			marker := fmt.Sprintf("spindle-test-marker-%d", time.Now().UnixNano())
			out := &upWriter{want: []string{"[worker 0] up\n", "[worker 1] up\n"}, up: make(chan struct{})}
			c := New(Config{Environ: os.Environ(), Stdout: out, Log: quietLog(), StopGrace: 500 * time.Millisecond})
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			for rank := range 2 {
				l := job.Launch{ID: int64(rank + 1), Task: job.Task{Role: conf.RoleWorker, Rank: rank},
					Command: []string{"/bin/sh", "-c", tt.script},
					Env:     func(node string, base []string) []string { return append(base, "SPINDLE_TEST_MARKER="+marker) }}
				if err := c.Start(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			// Both placed, both up.
			for placed := 0; placed < 2; {
				select {
				case ev := <-c.Events():
					if ev.Kind != job.Placed || ev.Node != Node {
						t.Fatalf("event %+v before the processes were stopped", ev)
					}
					placed++
				case <-ctx.Done():
					t.Fatal("not placed")
				}
			}
			select {
			case <-out.up:
			case <-ctx.Done():
				t.Fatal("processes not up")
			}
			if err := c.StopAll(ctx); err != nil {
				t.Fatalf("StopAll: %v", err)
			}
			if left := survivors(t, marker); len(left) > 0 {
				t.Fatalf("processes left behind:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}

// TestClusterStopsStoppedProcesses starts processes that stop themselves
// (SIGSTOP, as a task found silent often is) and stops them with a grace
// period longer than the test's bound: Stop and StopAll must end them
// with SIGTERM, not wait for the grace period's SIGKILL.
func TestClusterStopsStoppedProcesses(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("spindle-test-marker-%d", time.Now().UnixNano())
	c := New(Config{Environ: os.Environ(), Stdout: io.Discard, Log: quietLog(), StopGrace: time.Hour})
	defer func() {
		// After a failure, what still runs would wait for the hour's
		// SIGKILL in Close.
		c.mu.Lock()
		for _, p := range c.procs {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		c.mu.Unlock()
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for rank := range 2 {
		l := job.Launch{ID: int64(rank + 1), Task: job.Task{Role: conf.RoleWorker, Rank: rank},
			Command: []string{"/bin/sh", "-c", `kill -STOP $$; sleep 600 & wait`},
			Env:     func(node string, base []string) []string { return append(base, "SPINDLE_TEST_MARKER="+marker) }}
		if err := c.Start(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// Both stopped.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for id := int64(1); id <= 2; id++ {
		c.mu.Lock()
		pid := c.procs[id].cmd.Process.Pid
		c.mu.Unlock()
		for !stopped(pid) {
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("launch %d never stopped itself", id)
			}
		}
	}
	if err := c.Stop(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-c.Events():
			if ev.Kind != job.Exited {
				continue
			}
			if ev.ID != 1 || !strings.Contains(ev.Exit.Desc, "terminated") {
				t.Errorf("exit %+v; want launch 1 ended by SIGTERM", ev)
			}
		case <-ctx.Done():
			t.Fatal("the stopped process Stop asked to end is still there")
		}
		break
	}
	if err := c.StopAll(ctx); err != nil {
		t.Fatalf("StopAll: %v", err)
	}
	if left := survivors(t, marker); len(left) > 0 {
		t.Fatalf("processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

// stopped says whether process pid is stopped by a signal.
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}

// upWriter closes up once its output holds every line of want.
type upWriter struct {
	syncbuf.Buffer
	want []string
	up   chan struct{}
	once sync.Once
}

func (w *upWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	s := w.String()
	for _, l := range w.want {
		if !strings.Contains(s, l) {
			return n, err
		}
	}
	w.once.Do(func() { close(w.up) })
	return n, err
}
