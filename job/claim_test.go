package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
	"golang.org/x/sys/unix"
)

// TestClaimsKeepJobsApart: while a job runs, another job given the same
// output or checkpoint directory is refused, with Overwrite or without,
// by ps-submit's check as by its own preparation, and told which job
// holds it; once the first job ended, its claims are gone and the next
// job goes ahead.
func TestClaimsKeepJobsApart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, ck := filepath.Join(dir, "model"), filepath.Join(dir, "ckpt")
	spec := func(overwrite bool) JobSpec {
		return JobSpec{Name: "first", Command: []string{"prog"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1,
			Output: out, CheckpointDir: ck, CheckpointInterval: "1", Overwrite: overwrite}
	}
	a, err := New(ctx, spec(false), Options{Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, d := range []string{out, ck} {
		if _, err := os.Stat(filepath.Join(d, claimFile)); err != nil {
			t.Errorf("no claim in %s while the job runs: %v", d, err)
		}
	}
	for _, overwrite := range []bool{false, true} {
		second := spec(overwrite)
		second.Name = "second"
		if err := Check(ctx, second, localResolver(), nil); !errors.Is(err, ErrOutputInUse) || !strings.Contains(err.Error(), `job "first"`) {
			t.Errorf("check with overwrite %v: %v; want it in use by job \"first\"", overwrite, err)
		}
		if b, err := New(ctx, second, Options{Log: quietLog()}); !errors.Is(err, ErrOutputInUse) {
			if b != nil {
				b.Close()
			}
			t.Errorf("second job with overwrite %v: %v; want it in use", overwrite, err)
		}
	}
	resume := JobSpec{Name: "resumed", Command: []string{"prog"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1,
		CheckpointDir: ck, Resume: true}
	if err := Check(ctx, resume, localResolver(), nil); !errors.Is(err, ErrOutputInUse) {
		t.Errorf("check of a job resumed from the running one's checkpoints: %v; want them in use", err)
	}
	f := newFake(t, func(f *fake, l Launch) {
		if l.Task.Role == conf.RoleServer {
			writeFile(f.t, filepath.Join(out, "part-00000"), []byte("model"))
		}
		f.exit(l, 0)
	})
	f.j = a
	if res, err := a.Run(ctx, f); res.State != tracker.Succeeded {
		t.Fatalf("first job: %v %v", res.State, err)
	}
	for _, d := range []string{out, ck} {
		if _, err := os.Stat(filepath.Join(d, claimFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("claim in %s after the job: %v", d, err)
		}
	}
	b, err := New(ctx, spec(true), Options{Log: quietLog()})
	if err != nil {
		t.Fatalf("a job after the first ended: %v", err)
	}
	b.Close()
}

// TestVoidClaims: a claim not renewed for claimStale, or made on this
// host by a process that is gone (a zombie too), is taken over; a fresh
// one from another host, or from a process that runs, is not.
func TestVoidClaims(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	gone := os.Getpid() // a child's pid once it has been waited for
	if p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{}); err == nil {
		if _, err := p.Wait(); err == nil {
			gone = p.Pid
		}
	}
	// A child killed and not waited for: a zombie until it is.
	sleeper, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	defer sleeper.Wait()
	if err := sleeper.Kill(); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, sleeper.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		c     claim
		age   time.Duration
		taken bool
	}{
		{"fresh, another host", claim{Job: "other", Host: "elsewhere.example", PID: 1}, 0, false},
		{"fresh, a process that runs here", claim{Job: "other", Host: host, PID: os.Getpid()}, 0, false},
		{"fresh, a process gone from here", claim{Job: "other", Host: host, PID: gone}, 0, gone != os.Getpid()},
		{"fresh, a process killed here, not waited for", claim{Job: "other", Host: host, PID: sleeper.Pid}, 0, true},
		{"stale, another host", claim{Job: "other", Host: "elsewhere.example", PID: 1}, claimStale + time.Minute, true},
		{"stale, unreadable", claim{}, claimStale + time.Minute, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), fmt.Sprint("model", i))
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(tt.c)
			if tt.c.Job == "" {
				data = []byte("{half")
			}
			p := filepath.Join(out, claimFile)
			writeFile(t, p, data)
			at := time.Now().Add(-tt.age)
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
			j, err := New(t.Context(), JobSpec{Name: "next", Command: []string{"prog"}, NumWorkers: 1, MaxAttempts: 1, Output: out}, Options{Log: quietLog()})
			if tt.taken {
				if err != nil {
					t.Fatalf("void claim not taken over: %v", err)
				}
				defer j.Close()
				var c claim
				if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &c) != nil || c.Job != "next" || c.PID != os.Getpid() {
					t.Errorf("claim after the take-over: %+v %v; want this job's", c, err)
				}
				return
			}
			if err == nil {
				j.Close()
			}
			if !errors.Is(err, ErrOutputInUse) || !strings.Contains(err.Error(), claimFile) {
				t.Errorf("live claim: %v; want it refused, naming the claim", err)
			}
		})
	}
}

// TestDropClaim: whoever cleans up after a killed YARN application
// removes the claims its ApplicationMaster left, and only those.
func TestDropClaim(t *testing.T) {
	t.Parallel()
	fsys, _, err := localResolver().Resolve(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		container string
		partial   []byte // the claim file's contents when not a whole claim
		dropped   bool
	}{
		{container: "container_1795871490958_0019_01_000001", dropped: true},
		{container: "container_e17_1795871490958_0019_02_000001", dropped: true},
		{container: "container_1795871490958_0190_01_000001", dropped: false},
		{container: "", dropped: false},
		// The ApplicationMaster killed while it wrote the claim.
		{partial: []byte{}, dropped: true},
		{partial: []byte(`{"job":"j","host":"elsewhere.exa`), dropped: true},
	} {
		dir := t.TempDir()
		data, _ := json.Marshal(claim{Job: "j", Host: "elsewhere.example", Container: tt.container})
		if tt.partial != nil {
			data = tt.partial
		}
		writeFile(t, filepath.Join(dir, claimFile), data)
		if err := DropClaim(t.Context(), fsys, dir, "application_1795871490958_0019"); err != nil {
			t.Fatal(err)
		}
		_, err := os.Stat(filepath.Join(dir, claimFile))
		if dropped := errors.Is(err, os.ErrNotExist); dropped != tt.dropped {
			t.Errorf("claim of container %q (partial %q) dropped: %v, want %v", tt.container, tt.partial, dropped, tt.dropped)
		}
	}
}
