package local

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
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
