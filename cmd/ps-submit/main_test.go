package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGINTStopsEveryChild runs the real binary with a job whose
// processes would run for ten minutes, sends it SIGINT once they are up,
// and checks that it exits non-zero promptly and that no process of the
// job survives.
func TestSIGINTStopsEveryChild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ps-submit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	marker := fmt.Sprintf("spindle-sigint-test-%d", time.Now().UnixNano())
	// The marker is in every descendant's environment, grandchildren
	// (the sleeps) included.
	cmd := exec.Command(bin, "--cluster", "local", "-n", "2", "-s", "1", "--env", "SPINDLE_TEST_MARKER="+marker, "--",
		"/bin/sh", "-c", `echo up; sleep 600 & wait`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
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
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Error("ps-submit exited 0 after SIGINT")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ps-submit did not exit after SIGINT")
	}
	if !strings.Contains(stderr.String(), "KILLED") {
		t.Errorf("summary does not say KILLED:\n%s", stderr.String())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			t.Errorf("survivor %s: %s", p, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}
