package yarnclient

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/yarn"
)

func TestAMMainBadAllocationTimeout(t *testing.T) {
	t.Parallel()
	job := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(job, []byte(`{"spec":{},"allocation_timeout":"soon"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := AMMain(context.Background(), []string{job}, &stderr, nil); code != 1 || !strings.Contains(stderr.String(), "allocation_timeout") {
		t.Errorf("exit %d, stderr %q; want 1 naming allocation_timeout", code, stderr.String())
	}
}

// TestHadoopSubmitYARNApplicationFlags submits with ps-submit's YARN
// application flags: the report carries the tags, and the AM got the
// allocation timeout.
func TestHadoopSubmitYARNApplicationFlags(t *testing.T) {
	cl := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "ps-submit")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/spindle-ps/spindle/cmd/ps-submit").CombinedOutput(); err != nil {
		t.Fatalf("go build ps-submit: %v\n%s", err, out)
	}
	rm := testRM(ctx, t, cl)
	cmd := exec.CommandContext(ctx, bin, "--cluster", "yarn", "-n", "1", "--jobname", "spindle-flags",
		"--worker-memory", "128m", "--am-memory", "256m", "--am-cores", "1", "--max-app-attempts", "1",
		"--priority", "2", "--tags", "Spindle-Flags,nightly", "--allocation-timeout", "2m",
		"--", "/bin/sh", "-c", "echo ok")
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("ps-submit:\n%s", out.String())
	if err != nil {
		t.Fatalf("ps-submit: %v", err)
	}
	m := appIDRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("no application id printed")
	}
	id, err := yarn.ParseApplicationID(m[1])
	if err != nil {
		t.Fatal(err)
	}
	r, err := rm.ApplicationReport(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded {
		t.Errorf("state %v final %v: %s", r.State, r.FinalStatus, r.Diagnostics)
	}
	// Some ResourceManagers lowercase tags.
	var tags []string
	for _, tg := range r.Tags {
		tags = append(tags, strings.ToLower(tg))
	}
	slices.Sort(tags)
	if !slices.Equal(tags, []string{"nightly", "spindle-flags"}) {
		t.Errorf("report tags %q, want nightly and spindle-flags", r.Tags)
	}
	found := false
	for c, s := range hadooptest.ContainerFiles(t, id.String(), "stderr") {
		if strings.Contains(s, "application master registered") {
			found = true
			if !strings.Contains(s, "allocation_timeout=2m0s") {
				t.Errorf("AM %s did not get the allocation timeout:\n%s", c, s)
			}
		}
	}
	if !found {
		t.Logf("AM log not on local disk; not checking the allocation timeout")
	}
}
