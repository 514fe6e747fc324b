package yarnclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/job"
)

// TestPlanRefusesPlainPaths checks that the library refuses, as ps-submit
// does, a job on YARN whose paths name no file system, each as a
// FieldError, and takes those that do.
func TestPlanRefusesPlainPaths(t *testing.T) {
	t.Parallel()
	spec := job.JobSpec{Command: []string{"./prog"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1,
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
	if err := CheckPaths(job.JobSpec{Inputs: []string{"hdfs:///a", "file:///b"}, Output: "hdfs:///m"}); err != nil {
		t.Errorf("CheckPaths of URIs: %v", err)
	}
}
