package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalStopsEveryChild runs the real binary with a job whose
// processes would run for ten minutes, sends it SIGINT, SIGTERM or SIGHUP
// (a closed terminal) once they are up, and checks that it exits non-zero
// promptly, that no process of the job survives, and that it removed its
// temporary files (the job's keys, its nodes' socket directory).
func TestSignalStopsEveryChild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ps-submit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { signalStops(t, bin, sig) })
	}
}

func signalStops(t *testing.T, bin string, sig syscall.Signal) {
	marker := fmt.Sprintf("spindle-signal-test-%d", time.Now().UnixNano())
	tmp := t.TempDir()
	// The marker is in every descendant's environment, grandchildren
	// (the sleeps) included.
	cmd := exec.Command(bin, "--cluster", "local", "-n", "2", "-s", "1", "--jobs-dir", t.TempDir(),
		"--env", "SPINDLE_TEST_MARKER="+marker, "--",
		"/bin/sh", "-c", `echo up; sleep 600 & wait`)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for _, pid := range marked(marker) { // a failed run leaves nothing either
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// Wait until the four processes (scheduler, server, two workers) said
	// they are up.
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			if strings.HasSuffix(sc.Text(), "] up") {
				if n++; n == 4 {
					close(up)
				}
			}
		}
	}()
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatalf("the job's processes never came up; stderr:\n%s", stderr.String())
	}
	if left, _ := os.ReadDir(tmp); len(left) == 0 {
		t.Fatal("the running job keeps nothing in TMPDIR: the check below would prove nothing")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Errorf("ps-submit exited 0 after %v", sig)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("ps-submit did not exit after %v", sig)
	}
	if !strings.Contains(stderr.String(), "KILLED") {
		t.Errorf("summary does not say KILLED:\n%s", stderr.String())
	}
	for _, pid := range marked(marker) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		t.Errorf("survivor %d: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left in TMPDIR after %v: %s", sig, e.Name())
	}
}

// marked returns the processes with marker in their environment.
func marked(marker string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
