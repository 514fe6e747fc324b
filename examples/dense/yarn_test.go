package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
)

// TestHadoopYARNDenseFromHDFS runs ps-dense in ZeRO mode as a YARN
// application of two workers and no server (ps-submit -s 0) on the mini
// cluster, from HDFS to HDFS with its test set in HDFS: the model is the
// single process's, bit for bit, and worker 0 holds half the optimizer
// state.
func TestHadoopYARNDenseFromHDFS(t *testing.T) {
	c := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := c.TempDir(t)
	for _, name := range []string{"train.csv", "test.csv"} {
		data, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.FS.Create(ctx, dir+"/"+name, dfs.CreateOptions{BlockSize: 1 << 20})
		if err == nil {
			_, err = w.Write(data)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
	}
	uri := "hdfs://" + dir + "/model"
	args := append([]string{"--cluster", "yarn", "--jobname", "dense-yarn", "-n", "2", "-s", "0", "--max-attempts", "1",
		"--worker-memory", "256m", "--server-memory", "256m", "--input", "hdfs://" + dir + "/train.csv", "--split-size", "64k",
		"--output", uri, "--", psDense, "--test", "hdfs://" + dir + "/test.csv"}, flags(dense.ModeZeRO)...)
	cmd := exec.CommandContext(ctx, psSubmit, args...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ps-submit: %v\n%s", err, out.String())
	}
	t.Logf("ps-submit:\n%s", out.String())
	metrics := checkModel(t, c.Resolver, uri)
	checkMemory(t, metrics, dense.ModeZeRO, 2)
	if metrics["test_accuracy"] <= 0 {
		t.Errorf("no test accuracy in the manifest's metrics %v", metrics)
	}
}
