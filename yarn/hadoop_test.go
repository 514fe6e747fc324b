package yarn_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/yarn"
)

func connectRM(t *testing.T) (*hadooptest.Cluster, *yarn.RMClient) {
	t.Helper()
	cl := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rm, err := yarn.NewRMClient(ctx, cl.Conf, yarn.Identity{User: cl.User})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	return cl, rm
}

func TestHadoopClusterMetricsAndNodes(t *testing.T) {
	_, rm := connectRM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := rm.ClusterMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("metrics: %+v", m)
	if m.NodeManagers != 2 {
		t.Errorf("NodeManagers = %d, want 2", m.NodeManagers)
	}
	nodes, err := rm.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("Nodes returned %d nodes, want 2: %+v", len(nodes), nodes)
	}
	for _, n := range nodes {
		t.Logf("node: %+v", n)
		if n.State != yarn.NodeRunning || n.Host == "" || n.Port <= 0 || n.Capability.MemoryMB <= 0 || n.Capability.VCores <= 0 {
			t.Errorf("node %+v: want RUNNING with an address and capability", n)
		}
	}
	q, err := rm.Queue(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("queue: %+v", q)
	if q.Name != "default" || q.State != yarn.QueueRunning {
		t.Errorf("queue %+v: want default, RUNNING", q)
	}
}

func TestHadoopUnknownApplication(t *testing.T) {
	_, rm := connectRM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rm.ApplicationReport(ctx, yarn.ApplicationID{ClusterTimestamp: app.ID.ClusterTimestamp, ID: app.ID.ID + 1000})
	if !errors.Is(err, yarn.ErrApplicationNotFound) {
		t.Fatalf("ApplicationReport of an unknown id: err = %v, want ErrApplicationNotFound", err)
	}
	var re *yarn.RemoteError
	if !errors.As(err, &re) || re.Method != "getApplicationReport" {
		t.Errorf("err = %#v, want a *yarn.RemoteError for getApplicationReport", err)
	}
}

// waitState polls the report until cond holds or ctx ends.
func waitState(ctx context.Context, t *testing.T, rm *yarn.RMClient, id yarn.ApplicationID, cond func(yarn.ApplicationReport) bool) yarn.ApplicationReport {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last yarn.ApplicationReport
	for {
		r, err := rm.ApplicationReport(ctx, id)
		if err != nil {
			t.Fatalf("report of %v (last %+v): %v", id, last, err)
		}
		last = r
		if cond(r) {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %v: %v; last report %+v", id, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func TestHadoopSubmitAndKill(t *testing.T) {
	cl, rm := connectRM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new application %v, max %+v", app.ID, app.MaxResource)
	if app.ID.ClusterTimestamp <= 0 || app.MaxResource.MemoryMB <= 0 || app.MaxResource.VCores <= 0 {
		t.Fatalf("NewApplication = %+v", app)
	}
	if got, err := yarn.ParseApplicationID(app.ID.String()); err != nil || got != app.ID {
		t.Errorf("ParseApplicationID(%q) = %v, %v", app.ID, got, err)
	}
	name := "spindle-test-" + app.ID.String()
	err = rm.Submit(ctx, yarn.Submission{
		ID:          app.ID,
		Name:        name,
		Type:        "SPINDLE",
		Tags:        []string{"spindle-test"},
		Command:     []string{"sleep 300"},
		Env:         map[string]string{"SPINDLE_TEST": "1"},
		Resource:    yarn.Resource{MemoryMB: 128, VCores: 1},
		MaxAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(ctx, t, rm, app.ID, func(r yarn.ApplicationReport) bool {
		return r.State == yarn.AppAccepted || r.State == yarn.AppRunning || r.State.Terminal()
	})
	t.Logf("after submit: %+v", r)
	if r.State.Terminal() {
		t.Fatalf("application ended before kill: %+v", r)
	}
	if r.Name != name || r.Type != "SPINDLE" || r.User != cl.User || r.ID != app.ID {
		t.Errorf("report %+v: want name %q, type SPINDLE, user %q", r, name, cl.User)
	}
	// The state turns RUNNING only when an AM registers; this one never
	// does, so it is killed while ACCEPTED with its AM container running.
	if _, err := rm.Kill(ctx, app.ID); err != nil {
		t.Fatal(err)
	}
	r = waitState(ctx, t, rm, app.ID, func(r yarn.ApplicationReport) bool { return r.State.Terminal() })
	if r.State != yarn.AppKilled || r.FinalStatus != yarn.FinalKilled {
		t.Errorf("after kill: state %v final %v, want KILLED/KILLED (%+v)", r.State, r.FinalStatus, r)
	}
	// A second kill of a finished application is harmless.
	if _, err := rm.Kill(ctx, app.ID); err != nil {
		t.Errorf("second kill: %v", err)
	}

	out, ok := yarnCLI(t, "application", "-list", "-appStates", "ALL")
	if !ok {
		return
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), app.ID.String()) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("yarn application -list does not show %v:\n%s", app.ID, out)
	}
	f := strings.Fields(line)
	t.Logf("yarn application -list: %q", f)
	if len(f) < 6 || f[1] != name || f[2] != "SPINDLE" || f[5] != "KILLED" {
		t.Errorf("yarn application -list line %q: want name %q, type SPINDLE, state KILLED", line, name)
	}
}

// yarnCLI runs Hadoop's own "yarn ARGS..." through scripts/minicluster.sh.
func yarnCLI(t *testing.T, args ...string) ([]byte, bool) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "minicluster.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, append([]string{"yarn"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Logf("not checking with Hadoop's yarn CLI: %v: %s", err, ee.Stderr)
		} else {
			t.Logf("not checking with Hadoop's yarn CLI: %v", err)
		}
		return nil, false
	}
	return out, true
}
