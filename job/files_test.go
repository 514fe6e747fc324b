package job

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/io/dfs"
)

// TestBesideDir: the directory beside an output, for paths and URIs, and
// none beside a root.
func TestBesideDir(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ dir, want string }{
		{"/tmp/model", "/tmp/.model.spindle-new"},
		{"/tmp/model/", "/tmp/.model.spindle-new"},
		{"model", ".model.spindle-new"},
		{"hdfs://nn:8020/models/lr", "hdfs://nn:8020/models/.lr.spindle-new"},
		{"hdfs:///lr", "hdfs:///.lr.spindle-new"},
		{"file:///tmp/m", "file:///tmp/.m.spindle-new"},
		{"/", ""},
		{"", ""},
		{".", ""},
		{"/tmp/..", ""},
		{"hdfs://nn:8020", ""},
		{"hdfs://nn:8020/", ""},
		{"hdfs:///", ""},
	} {
		got, ok := besideDir(tt.dir, stageSuffix)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("besideDir(%q) = %q, %v; want %q", tt.dir, got, ok, tt.want)
		}
	}
}

// renameFails is the local file system with Rename failing for one
// source name.
type renameFails struct {
	dfs.Local
	from string
}

func (r renameFails) Rename(ctx context.Context, oldname, newname string) error {
	if oldname == r.from {
		return errors.New("rename refused")
	}
	return r.Local.Rename(ctx, oldname, newname)
}

// TestSwapInFailureKeepsBothModels: when the new model, complete beside
// the output, cannot take the output's place, the old model goes back to
// the output, the new one stays where it is (a failed job's clean-up
// leaves it), and the error says where each is.
func TestSwapInFailureKeepsBothModels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, stage := filepath.Join(dir, "model"), filepath.Join(dir, ".model"+stageSuffix)
	for d, part := range map[string]string{out: "old", stage: "new"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "part-00000"), []byte(part), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &files{spec: JobSpec{Output: out}, log: quietLog(),
		stage: &stagedOutput{fsys: renameFails{from: stage}, out: out, dir: stage, uri: stage}}
	err := f.swapIn(t.Context())
	if err == nil || !strings.Contains(err.Error(), "the new model is complete in "+stage) ||
		!strings.Contains(err.Error(), "the model it was to replace is back in "+out) {
		t.Errorf("swapIn: %v; want it to say where each model is", err)
	}
	f.dropStage(t.Context())
	for d, want := range map[string]string{out: "old", stage: "new"} {
		if b, err := os.ReadFile(filepath.Join(d, "part-00000")); err != nil || string(b) != want {
			t.Errorf("%s after the failed swap: %q, %v; want %q", d, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".model"+oldSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old model's temporary name after the failed swap: %v, want none", err)
	}
}
