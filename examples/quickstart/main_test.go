package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
)

// TestReadmeHoldsTheProgram: the README shows this very program, so that
// the compiler checks what readers copy.
func TestReadmeHoldsTheProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// From the package clause on: the README introduces the program in
	// its own words.
	code := string(src[bytes.Index(src, []byte("package main")):])
	if !strings.Contains(string(readme), "```go\n"+code+"```\n") {
		t.Error("README.md's \"Writing a program against psnode\" does not hold examples/quickstart/main.go from its package clause on, in a go code block")
	}
}

// TestQuickstartJob runs the program as a real 2×2 job under the local
// launcher: every epoch is checkpointed and the model holds the four
// weights near their targets k/10.
func TestQuickstartJob(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := logrus.New()
	l.Out = io.Discard
	out, ck := filepath.Join(dir, "model"), filepath.Join(dir, "ckpt")
	var stdout bytes.Buffer
	res, err := local.Run(ctx, job.JobSpec{
		Name: "quickstart", Command: []string{bin}, NumWorkers: 2, NumServers: 2, MaxAttempts: 1,
		Output: out, CheckpointDir: ck, CheckpointInterval: "1",
	}, local.Options{Environ: os.Environ(), Stdout: &stdout, Log: logrus.NewEntry(l)})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job: %v %v\n%s", res.State, err, stdout.String())
	}
	for _, n := range []string{"1", "2", "3"} {
		if _, err := os.Stat(filepath.Join(ck, n, "_manifest.json")); err != nil {
			t.Errorf("checkpoint %s not committed: %v", n, err)
		}
	}
	r, err := dfs.DefaultResolver(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[uint64]float32{}
	err = model.Read(ctx, r, out, func(key uint64, vals []float32) error {
		got[key] = vals[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := uint64(1); k <= 4; k++ {
		if w, ok := got[k]; !ok || math.Abs(float64(w)-float64(k)/10) > 1e-3 {
			t.Errorf("weight of key %d is %v (present %v), want about %v", k, w, ok, float64(k)/10)
		}
	}
}
