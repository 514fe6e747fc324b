package yarnclient

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/yarn"
)

// stagingDirs lists the staging directories of the cluster's user.
func stagingDirs(t *testing.T, cl *hadooptest.Cluster) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string]bool{}
	fis, err := cl.FS.ReadDir(ctx, "/user/"+cl.User+"/.spindle")
	if err != nil {
		return out // none yet
	}
	for _, fi := range fis {
		out[fi.Name()] = true
	}
	return out
}

// TestHadoopYARNDryRun: ps-submit --dry-run --cluster yarn prints every
// container and every file, and neither submits an application nor
// stages anything. Other tests may submit to the same cluster meanwhile,
// so the applications and staging directories that appear are checked by
// the dry run's unique job name.
func TestHadoopYARNDryRun(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rm := testRM(ctx, t, cl)
	dir := t.TempDir()
	for name, body := range map[string]string{"prog.sh": "#!/bin/sh\necho hi\n", "data.txt": "hello\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeZip(t, filepath.Join(dir, "conf.zip"), map[string]string{"a.txt": "a"})
	name := "spindle-dryrun-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	before, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	staged := stagingDirs(t, cl)
	cmd := exec.CommandContext(ctx, bin, "--cluster", "yarn", "--dry-run", "-n", "2", "-s", "1", "--jobname", name,
		"--files", "data.txt", "--archives", "conf.zip", "--", "./prog.sh")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ps-submit --dry-run: %v\n%s", err, stderr.String())
	}
	t.Logf("dry run:\n%s", stdout.String())
	for _, want := range []string{"container application-master", "container scheduler 0:", "container server 0:",
		"container worker 0:", "container worker 1:", "resource ps-submit\n", "resource job.json\n", "resource prog.sh\n",
		"resource data.txt\n", "resource conf\n", "conf                     ARCHIVE"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("dry run lacks %q", want)
		}
	}
	after, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Applications the ResourceManager knows of since: none is ours.
	for id := before.ID.ID + 1; id < after.ID.ID; id++ {
		app := yarn.ApplicationID{ClusterTimestamp: before.ID.ClusterTimestamp, ID: id}
		if r, err := rm.ApplicationReport(ctx, app); err == nil && r.Name == name {
			t.Errorf("the dry run submitted %v", app)
		}
	}
	// Staging directories made since: none is ours.
	for d := range stagingDirs(t, cl) {
		if staged[d] {
			continue
		}
		f, err := cl.FS.Open(ctx, "/user/"+cl.User+"/.spindle/"+d+"/job.json")
		if err != nil {
			continue // another test's, being removed
		}
		b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
		f.Close()
		var jc amJobConfig
		if json.Unmarshal(b, &jc) == nil && jc.Spec.Name == name {
			t.Errorf("the dry run staged %s", d)
		}
	}
}

func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHadoopYARNArchives: --archives reach every task unpacked (the
// NodeManager unpacks them) in the directory their name says.
func TestHadoopYARNArchives(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeZip(t, filepath.Join(dir, "conf.zip"), map[string]string{"sub/a.txt": "from-zip"})
	// A tar.gz built with the system's tar, as users make them.
	if err := os.MkdirAll(filepath.Join(dir, "src", "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "w", "words.txt"), []byte("from-tgz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.CommandContext(ctx, "tar", "-czf", filepath.Join(dir, "dict.tar.gz"), "-C", filepath.Join(dir, "src"), "w").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	cmd := exec.CommandContext(ctx, bin, "--cluster", "yarn", "-n", "1", "-s", "0", "--worker-memory", "128m",
		"--archives", "dict.tar.gz", "--archives", "conf.zip#cfg", "--",
		"/bin/sh", "-c", "echo archives $(cat dict/w/words.txt) $(cat cfg/sub/a.txt)")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("ps-submit:\n%s", out.String())
	if err != nil {
		t.Fatalf("ps-submit: %v", err)
	}
	app := submittedApp(t, out.String())
	stdout := hadooptest.ContainerFiles(t, app.String(), "stdout")
	found := false
	for _, s := range stdout {
		found = found || s == "archives from-tgz from-zip\n"
	}
	if !found && os.Getenv("SPINDLE_MINICLUSTER_DIR") != "" {
		t.Errorf("no container printed the archives' contents: %q", stdout)
	}
	checkStagingGone(t, cl, app)
}

// TestHadoopSubmitYARNTooLarge: containers larger than the cluster grants
// are refused at once, each naming its flag and the cluster's largest
// container, with nothing staged or submitted (YARN itself would refuse
// them only once the ApplicationMaster runs and asks).
func TestHadoopSubmitYARNTooLarge(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rm := testRM(ctx, t, cl)
	before, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	max := before.MaxResource
	if max.MemoryMB <= 0 || max.VCores <= 0 {
		t.Fatalf("the ResourceManager gave no largest container: %+v", max)
	}
	cmd := exec.CommandContext(ctx, bin, "--cluster", "yarn", "-n", "1", "-s", "1",
		"--worker-memory", fmt.Sprint(2*max.MemoryMB), "--am-cores", fmt.Sprint(max.VCores+1), "--", "/bin/true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("ps-submit: %v; want exit status 1", err)
	}
	limit := fmt.Sprintf(": more than the largest container this cluster grants (%d MB, %d vcores)", max.MemoryMB, max.VCores)
	for _, want := range []string{fmt.Sprintf("--worker-memory %d MB", 2*max.MemoryMB) + limit, fmt.Sprintf("--am-cores %d", max.VCores+1) + limit} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("ps-submit's output lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "--server-memory") || strings.Contains(stderr.String(), "application submitted") {
		t.Errorf("ps-submit refused a container that fits, or submitted:\n%s", stderr.String())
	}
	after, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	staged := stagingDirs(t, cl)
	for id := before.ID.ID + 1; id < after.ID.ID; id++ {
		app := yarn.ApplicationID{ClusterTimestamp: before.ID.ClusterTimestamp, ID: id}
		if staged[app.String()] {
			t.Errorf("%v was staged", app)
		}
		if r, err := rm.ApplicationReport(ctx, app); err == nil && r.Name == "spindle:true" {
			t.Errorf("%v was submitted: %v", app, r.State)
		}
	}
}
