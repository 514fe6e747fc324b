package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
)

// The YARN tests run ps-fm as a YARN application on the mini cluster
// (scripts/minicluster.sh), submitted by the ps-submit binary, which is
// also the ApplicationMaster, reading from and writing to its HDFS.

// uploadData copies the generated train and test sets into a fresh HDFS
// directory, in 1 MiB blocks so that records and shards cross block
// boundaries, and returns the directory's path.
func uploadData(t testing.TB, c *hadooptest.Cluster) string {
	t.Helper()
	setup(t)
	dir := c.TempDir(t)
	for _, name := range []string{"train.libsvm", "test.libsvm"} {
		data, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		c.WriteFile(t, dir+"/"+name, data, dfs.CreateOptions{BlockSize: 1 << 20})
	}
	return dir
}

// yarnFlags are ps-submit's flags for the 2×2 job named name on YARN,
// from dir's training set to the model dir/name.
func yarnFlags(dir, name string, extra ...string) []string {
	return append([]string{"--cluster", "yarn", "--jobname", name, "-n", "2", "-s", "2", "--max-attempts", "2",
		"--worker-memory", "512m", "--server-memory", "512m",
		"--input", "hdfs://" + dir + "/train.libsvm", "--split-size", "2m", "--output", "hdfs://" + dir + "/" + name}, extra...)
}

// appRE finds the application id in ps-submit's output ("ps-submit:
// application ID ACCEPTED", and the like).
var appRE = regexp.MustCompile(`\b(application_\d+_\d+)\b`)

// amLog is the ApplicationMaster's stderr (the first container's) of the
// application named in ps-submit's output out.
func amLog(t *testing.T, out string) string {
	t.Helper()
	m := appRE.FindStringSubmatch(out)
	if m == nil {
		return "(no application id in the output)"
	}
	for c, s := range hadooptest.ContainerFiles(t, m[1], "stderr") {
		if strings.HasSuffix(c, "_000001") {
			return s
		}
	}
	return ""
}

// hdfsParts reads the part files of the committed model at uri, by path
// relative to it.
func hdfsParts(t *testing.T, c *hadooptest.Cluster, uri string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := model.ReadManifest(ctx, c.Resolver, uri); err != nil {
		t.Fatalf("model %s: %v", uri, err)
	}
	fsys, dir, err := c.Resolver.Resolve(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string][]byte{}
	for _, table := range []string{"w", "v"} {
		for r := 0; r < 2; r++ {
			name := table + "/" + model.PartName(r)
			f, err := fsys.Open(ctx, dir+"/"+name)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, err = b.ReadFrom(f)
			f.Close()
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			parts[name] = b.Bytes()
		}
	}
	return parts
}

// sameParts reports the parts of got that differ from want's.
func sameParts(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: parts %v, want %v", what, keysOf(got), keysOf(want))
	}
	for name, w := range want {
		if !bytes.Equal(got[name], w) {
			t.Errorf("%s: %s differs (%d and %d bytes)", what, name, len(got[name]), len(w))
		}
	}
}

// TestHadoopYARNTrainFromHDFS: the synchronous 2×2 job on YARN, from HDFS
// to HDFS with its test set in HDFS, writes the very model of the same
// job run locally, whose test AUC is at least ps-lr's.
func TestHadoopYARNTrainFromHDFS(t *testing.T) {
	c := hadooptest.Connect(t)
	local := syncJob(t)
	dir := uploadData(t, c)
	out, err := submit(t, yarnFlags(dir, "fm-yarn"), []string{psFM, "--epochs", "2", "--test", "hdfs://" + dir + "/test.libsvm"}, nil)
	if err != nil {
		t.Fatalf("YARN job: %v\n%s\nAM log:\n%s", err, out, amLog(t, out))
	}
	uri := "hdfs://" + dir + "/fm-yarn"
	sameParts(t, "the model trained on YARN against the local run's", hdfsParts(t, c, uri), local.parts)
	auc, lAUC := exactAUCWith(t, c.Resolver, uri), lrAUC(t, lrJob(t))
	t.Logf("test AUC: ps-fm on YARN %.5f, ps-lr %.5f", auc, lAUC)
	if auc < lAUC {
		t.Errorf("ps-fm's test AUC on YARN %.5f is below ps-lr's %.5f", auc, lAUC)
	}
	if printed := evalAUC(t, uri); math.Abs(printed-auc) > 5e-5 {
		t.Errorf("ps-fm eval printed AUC %.4f for the model in HDFS, whose AUC is %.6f", printed, auc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := model.ReadManifest(ctx, c.Resolver, uri)
	if err != nil {
		t.Fatal(err)
	}
	if m.Training == nil {
		t.Fatal("the manifest has no training section")
	}
	for e := 0; e < 2; e++ {
		if got := m.Training.EpochRecords[e]; got != int64(rows) {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
}

// TestHadoopYARNServerKilled kills server 1's process with SIGKILL in its
// container during the third epoch of a synchronous job checkpointing
// into HDFS every epoch, whose servers keep no replicas (--replicas 0):
// the ApplicationMaster starts the job again from the newest committed
// checkpoint, and the model is the very one of the job never
// interrupted.
func TestHadoopYARNServerKilled(t *testing.T) {
	c := hadooptest.Connect(t)
	straight := straightJob(t)
	dir := uploadData(t, c)
	var killed []int
	var app string
	flags := yarnFlags(dir, "fm-yarn-server-killed", "--checkpoint-dir", "hdfs://"+dir+"/ckpt", "--checkpoint-interval", "1", "--replicas", "0")
	out, err := submit(t, flags, []string{psFM, "--epochs", "4"}, func(line string) {
		if m := appRE.FindStringSubmatch(line); m != nil {
			app = m[1]
		}
		m := statusRE.FindStringSubmatch(line)
		if killed != nil || m == nil || app == "" {
			return
		}
		epoch, _ := strconv.Atoi(m[1])
		done, _ := strconv.Atoi(m[2])
		total, _ := strconv.Atoi(m[3])
		// Checkpoint 1 is committed before any step of epoch 1 can
		// complete; checkpoint 2 may be under way.
		if epoch == 2 || (epoch == 3 && done < total-2) {
			killed = hadooptest.KillTask(t, hadooptest.ContainerOf(app), "server", 1)
		}
	})
	if len(killed) == 0 {
		t.Fatalf("server 1 was never killed mid-epoch (%v)\n%s", err, out)
	}
	if err != nil {
		t.Fatalf("YARN job after server 1 was killed: %v\n%s\nAM log:\n%s", err, out, amLog(t, out))
	}
	uri := "hdfs://" + dir + "/fm-yarn-server-killed"
	sameParts(t, "the model after a server was lost against the job never interrupted", hdfsParts(t, c, uri), straight.parts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := model.ReadManifest(ctx, c.Resolver, uri)
	if err != nil {
		t.Fatal(err)
	}
	if m.Training == nil || m.Training.Restarts != 1 || m.Training.ResumedFrom == "" {
		t.Errorf("the manifest's training section %+v; want 1 restart, from a checkpoint", m.Training)
	} else {
		t.Logf("started again from %s", m.Training.ResumedFrom)
	}
}
