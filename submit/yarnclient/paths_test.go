package yarnclient

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/job"
)

// TestPlanRefusesPlainPaths checks that the library refuses, as ps-submit
// does, a job on YARN whose paths name no file system, each as a
// FieldError, and takes those that do.
func TestPlanRefusesPlainPaths(t *testing.T) {
	t.Parallel()
	spec := job.JobSpec{Command: []string{"prog"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1,
		Inputs: []string{"hdfs:///in/a", "in/b", "file:///shared/c"}, Output: "/models/m", CheckpointDir: "hdfs://nn:8020/ckpt"}
	_, err := Plan(spec, Options{})
	var fe *job.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("Plan: %v; want a FieldError", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "job: Inputs in/b: a path without a scheme") ||
		!strings.HasPrefix(lines[1], "job: Output /models/m: a path without a scheme") {
		t.Errorf("Plan: %v; want Inputs in/b and Output /models/m refused, nothing else", err)
	}
	if err := checkPaths(job.JobSpec{Inputs: []string{"hdfs:///a", "file:///b"}, Output: "hdfs:///m"}); err != nil {
		t.Errorf("checkPaths of URIs: %v", err)
	}
	dir := t.TempDir()
	err = CheckSpec(job.JobSpec{Command: []string{"prog"}, Files: []string{dir}})
	if want := "job: Files " + dir + ": a directory, and YARN ships files"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("CheckSpec of a directory in Files: %v; want %q", err, want)
	}
}

// TestCheckCommand: a command given as a relative path must be here to
// ship, or come with --files or --archives; other commands are the nodes'.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(mustGetwd(t), prog)
	if err != nil {
		t.Fatal(err)
	}
	relDir := filepath.Dir(rel)
	for _, tc := range []struct {
		cmd      string
		files    []string
		archives []string
		want     string // what the error says; "" for none
	}{
		{cmd: rel},
		{cmd: prog},
		{cmd: "/opt/app/bin/train"}, // the nodes'
		{cmd: "python3"},            // on the nodes' PATH
		{cmd: "./missing.sh", want: `job: Command ./missing.sh: no such file here to ship, and no --files or --archives entry named "missing.sh" provides it`},
		{cmd: "bin/ps-lr-nowhere", want: `entry named "bin" provides it`},
		{cmd: "./missing.sh", files: []string{"/elsewhere/missing.sh"}},
		{cmd: "./app/run.sh", archives: []string{"/tmp/app.zip"}},
		{cmd: "./env/bin/python", archives: []string{"/tmp/venv.tar.gz#env"}},
		{cmd: relDir, want: "not a regular file"}, // a directory
	} {
		spec := job.JobSpec{Command: []string{tc.cmd}, Files: tc.files, Archives: tc.archives}
		err := checkCommand(spec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.cmd, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want it to say %q", tc.cmd, err, tc.want)
		}
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// TestNotFoundHint: a job whose command the nodes could not find (exit
// status 127) and that names a program of this machine's PATH without a
// slash ends with a hint to give its path, which ps-submit ships; no
// other failure gets one.
func TestNotFoundHint(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "mytool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	const notFound = "scheduler 0 failed: exit status 127 in container c_1 on n1:8041 on attempt 3 of 3; the cluster's diagnostics:\n    Container exited with a non-zero exit code 127. Error file: prelaunch.err.\n    Last 4096 bytes of stderr :\n    /bin/bash: line 1: mytool: command not found"
	if got, want := notFoundHint([]string{"mytool", "--epochs", "1"}, notFound), "to ship this machine's "+tool+" with the job, give its path: -- "+tool+")"; !strings.HasSuffix(got, want) {
		t.Errorf("hint %q; want it to end %q", got, want)
	}
	for _, tc := range []struct {
		command []string
		diag    string
	}{
		{[]string{tool}, notFound},                             // given by its path: shipped already
		{[]string{"mytool"}, "worker 0 failed: exit status 1"}, // found, and failed
		{[]string{"no-such-tool-here"}, notFound},              // not on this machine either
		{[]string{"sh", "-c", "nosuch"}, notFound},             // a system program: the nodes have their own
	} {
		if got := notFoundHint(tc.command, tc.diag); got != "" {
			t.Errorf("notFoundHint(%q, %q) = %q; want none", tc.command, tc.diag, got)
		}
	}
}
