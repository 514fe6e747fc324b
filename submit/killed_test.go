package submit

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledLauncherLeavesNothing kills a ps-submit that runs a local
// job with SIGKILL, which it cannot catch: its tasks end with it, and
// the directories it kept in the temporary directory (the job's keys
// file, the nodes' sockets) are removed by the next ps-submit of the
// same user, which leaves none of its own.
func TestKilledLauncherLeavesNothing(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to run tasks with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "ps-submit")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/spindle-ps/spindle/cmd/ps-submit").CombinedOutput(); err != nil {
		t.Fatalf("build ps-submit: %v\n%s", err, out)
	}
	tmp, home := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp, "HOME="+home)
	spindleDirs := func() []string {
		t.Helper()
		ents, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "spindle-") {
				out = append(out, e.Name())
			}
		}
		return out
	}

	cmd := exec.CommandContext(ctx, bin, "-n", "2", "-s", "1", "--", "/bin/sh", "-c", `echo "task $$ sleeping"; exec sleep 60`)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The scheduler, the server and both workers print their pid.
	var tasks []int
	sc := bufio.NewScanner(stdout)
	for len(tasks) < 4 && sc.Scan() {
		f := strings.Fields(sc.Text())
		if n := len(f); n >= 3 && f[n-1] == "sleeping" && f[n-3] == "task" {
			pid, err := strconv.Atoi(f[n-2])
			if err != nil {
				t.Fatalf("line %q", sc.Text())
			}
			tasks = append(tasks, pid)
		}
	}
	if len(tasks) < 4 {
		t.Fatalf("%d tasks started (%v)", len(tasks), sc.Err())
	}
	kept := spindleDirs()
	var keys, ipc bool
	for _, d := range kept {
		keys = keys || strings.HasPrefix(d, "spindle-job-")
		ipc = ipc || strings.HasPrefix(d, "spindle-ipc-")
	}
	if !keys || !ipc {
		t.Fatalf("the running job's directories in the temporary directory: %q; want its keys' and its sockets'", kept)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, pid := range tasks {
		for syscall.Kill(pid, 0) == nil {
			select {
			case <-ctx.Done():
				t.Fatalf("task process %d still runs after its ps-submit was killed", pid)
			case <-tick.C:
			}
		}
	}
	if got := spindleDirs(); len(got) != len(kept) {
		t.Fatalf("after the kill: %q; want the killed ps-submit's %q still there", got, kept)
	}

	next := exec.CommandContext(ctx, bin, "-n", "1", "-s", "1", "--", "/bin/sh", "-c", "exit 0")
	next.Env = env
	if out, err := next.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		t.Fatalf("the next job: %v\n%s", err, out)
	}
	if got := spindleDirs(); len(got) != 0 {
		t.Errorf("after the next job: %q left in the temporary directory; want none", got)
	}
}
