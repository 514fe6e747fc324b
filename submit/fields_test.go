package submit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
)

// TestWithFlags checks that the job's errors, which name JobSpec fields,
// reach the user naming ps-submit's flags.
func TestWithFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "model")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "part-00000"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, outputErr := local.Run(t.Context(), job.JobSpec{Command: []string{"true"}, NumWorkers: 1, MaxAttempts: 1, Output: out}, local.Options{})
	// An earlier job's checkpoints, which a job may go on from.
	_, ckptErr := local.Run(t.Context(), job.JobSpec{Command: []string{"true"}, NumWorkers: 1, MaxAttempts: 1, CheckpointDir: out, CheckpointInterval: "1"}, local.Options{})
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"validate", job.JobSpec{Command: []string{"x"}, MaxAttempts: 1}.Validate(), "--num-workers 0: need at least 1"},
		{"joined and wrapped", fmt.Errorf("start: %w", job.JobSpec{Command: []string{"x"}, NumWorkers: 1}.Validate()), "start: --max-attempts 0: need at least 1"},
		{"output exists", outputErr, "--output " + out + ": exists and is not empty (pass --overwrite to replace it)"},
		{"checkpoints exist", ckptErr, "--checkpoint-dir " + out + ": exists and is not empty (pass --resume to go on from its newest checkpoint, or pass --overwrite to clear it)"},
		{"resume without a dir", job.ErrResumeNeedsCheckpointDir, "--resume: needs --checkpoint-dir"},
		{"text from the ApplicationMaster", errors.New("server 0 failed: exit status 1: a parameter-server job cannot go on without it, and this job has no CheckpointDir to start again from (set CheckpointDir and CheckpointInterval to survive the loss of a server)"),
			"server 0 failed: exit status 1: a parameter-server job cannot go on without it, and this job has no --checkpoint-dir to start again from (give --checkpoint-dir and --checkpoint-interval to survive the loss of a server)"},
		{"restarts", errors.New("worker 0 asked to start the whole job again (exit code 75), and the job was started again 1 times already: MaxAttempts 2 allows 1"),
			"worker 0 asked to start the whole job again (exit code 75), and the job was started again 1 times already: --max-attempts 2 allows 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.err == nil {
				t.Fatal("no error")
			}
			if got := withFlags(tt.err); got != tt.want {
				t.Errorf("withFlags(%q) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
