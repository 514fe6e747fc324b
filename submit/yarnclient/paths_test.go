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
