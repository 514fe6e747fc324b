package tempdir

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestSweep: Sweep removes this user's directories of the prefix made
// in this PID namespace by a process that is gone, and nothing else: not
// a running process's, not another namespace's, not another prefix's,
// not one without its owner file or with a garbled one, not a file.
func TestSweep(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ns, ok := pidNamespace()
	if !ok {
		t.Fatal("no PID namespace in /proc/self/ns/pid")
	}
	dead := deadPID(t)
	mk := func(name, owner string) string {
		t.Helper()
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "inside"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(p, OwnerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	gone := mk("spindle-job-1", fmt.Sprintf("%d %d\n", ns, dead))
	keep := []string{
		mk("spindle-job-2", fmt.Sprintf("%d %d\n", ns, os.Getpid())),
		mk("spindle-job-3", fmt.Sprintf("%d %d\n", ns+1, dead)),
		mk("spindle-ipc-4", fmt.Sprintf("%d %d\n", ns, dead)),
		mk("spindle-job-5", ""),
		mk("spindle-job-6", fmt.Sprintf("%d\n", dead)),
		mk("spindle-job-7", fmt.Sprintf("%d -%d\n", ns, dead)),
	}
	file := filepath.Join(tmp, "spindle-job-8")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, file)
	if got := Sweep("spindle-job-"); !slices.Equal(got, []string{gone}) {
		t.Errorf("Sweep removed %q, want only %q", got, gone)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v; want it kept", p, err)
		}
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("%s: %v; want it removed", gone, err)
	}

	d, err := New("spindle-job-")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d)
	if err != nil || filepath.Dir(d) != tmp || !strings.HasPrefix(filepath.Base(d), "spindle-job-") || fi.Mode().Perm() != 0o700 {
		t.Fatalf("New made %q (%v, %v), want a directory of mode 0700 in %s", d, fi, err, tmp)
	}
	if o, ok := readOwner(d); !ok || o.ns != ns || o.pid != os.Getpid() {
		t.Errorf("New's owner file: %+v %v, want namespace %d, pid %d", o, ok, ns, os.Getpid())
	}
}
