package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
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
	dir := upload(ctx, t, c)
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

// upload copies train.csv and test.csv into a fresh HDFS directory, in
// 1 MiB blocks, and returns its path.
func upload(ctx context.Context, t *testing.T, c *hadooptest.Cluster) string {
	t.Helper()
	dir := c.TempDir(t)
	for _, name := range []string{"train.csv", "test.csv"} {
		data, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		c.WriteFile(t, dir+"/"+name, data, dfs.CreateOptions{BlockSize: 1 << 20})
	}
	return dir
}

// TestHadoopYARNDenseWorkerKilled: worker 1 of a ZeRO job on YARN kills
// itself as epoch 2 begins; the ApplicationMaster starts the job again
// from the checkpoint in HDFS after epoch 2, and the model is still the
// single process's.
func TestHadoopYARNDenseWorkerKilled(t *testing.T) {
	c := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := upload(ctx, t, c)
	uri := "hdfs://" + dir + "/model"
	args := append([]string{"--cluster", "yarn", "--jobname", "dense-yarn-killed", "-n", "2", "-s", "0", "--max-attempts", "2",
		"--worker-memory", "256m", "--server-memory", "256m", "--input", "hdfs://" + dir + "/train.csv",
		"--checkpoint-dir", "hdfs://" + dir + "/ckpt", "--checkpoint-interval", "1",
		"--output", uri, "--", psDense, "--die-after", "1:2"}, flags(dense.ModeZeRO)...)
	cmd := exec.CommandContext(ctx, psSubmit, args...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ps-submit: %v\n%s", err, out.String())
	}
	t.Logf("ps-submit:\n%s", out.String())
	checkModel(t, c.Resolver, uri)
	m, err := model.ReadManifest(ctx, c.Resolver, uri)
	if err != nil {
		t.Fatal(err)
	}
	if want := "hdfs://" + dir + "/ckpt/2"; m.Training == nil || m.Training.Restarts != 1 || !strings.HasSuffix(m.Training.ResumedFrom, want[len("hdfs://"):]) {
		t.Errorf("the manifest's training section %+v; want 1 restart from %s", m.Training, want)
	}
}
