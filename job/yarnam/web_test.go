package yarnam

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// submitAMJob submits the test ApplicationMaster bin running spec.
func submitAMJob(ctx context.Context, t *testing.T, rm *yarn.RMClient, bin, name string, spec job.JobSpec, sub yarn.Submission) yarn.ApplicationID {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	app, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub.ID, sub.Name, sub.Type = app.ID, name, "SPINDLE"
	sub.Command = append([]string{bin}, append(shellWords([]string{string(js)}), "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr")...)
	sub.Env = map[string]string{"HADOOP_CONF_DIR": os.Getenv("HADOOP_CONF_DIR")}
	sub.Resource = yarn.Resource{MemoryMB: 128, VCores: 1}
	if sub.MaxAttempts == 0 {
		sub.MaxAttempts = 1
	}
	if err := rm.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for c, s := range hadooptest.ContainerFiles(t, app.ID.String(), "stderr") {
				t.Logf("%s stderr:\n%s", c, s)
			}
		}
	})
	return app.ID
}

var statusURLRE = regexp.MustCompile(`status_url="?(http://[^"\s]+)`)

// TestHadoopAMStatusPage reads a running job's status page through the
// application's tracking URL (the ResourceManager's proxy), or, should
// the proxy not answer, at the address the AM logged.
func TestHadoopAMStatusPage(t *testing.T) {
	cl := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rm, err := yarn.NewRMClient(ctx, cl.Conf, yarn.Identity{User: cl.User})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	bin := buildAMJob(t)
	spec := job.JobSpec{Name: "spindle-web", Command: []string{"/bin/sh", "-c", "sleep 20"}, NumWorkers: 2, NumServers: 1,
		MaxAttempts: 1, WorkerMemoryMB: 128, ServerMemoryMB: 128}
	id := submitAMJob(ctx, t, rm, bin, "spindle-amjob-web", spec, yarn.Submission{})
	client := &http.Client{Timeout: 5 * time.Second}
	fetch := func(u string) (web.Status, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return web.Status{}, err
		}
		// Skips the proxy's warning page for users other than the owner.
		req.AddCookie(&http.Cookie{Name: "checked_" + id.String(), Value: "true"})
		resp, err := client.Do(req)
		if err != nil {
			return web.Status{}, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var ws web.Status
		if resp.StatusCode != 200 {
			return ws, &httpError{resp.Status, string(b)}
		}
		return ws, json.Unmarshal(b, &ws)
	}
	want := map[conf.Role]web.RoleStatus{conf.RoleScheduler: {Role: conf.RoleScheduler, Want: 1, Running: 1}, conf.RoleServer: {Role: conf.RoleServer, Want: 1, Running: 1}, conf.RoleWorker: {Role: conf.RoleWorker, Want: 2, Running: 2}}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last web.Status
	var lastErr error
	via := ""
	for ok := false; !ok; {
		select {
		case <-ctx.Done():
			t.Fatalf("status page never showed every task running: last %+v, %v", last, lastErr)
		case <-tick.C:
		}
		r, err := rm.ApplicationReport(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State.Terminal() {
			t.Fatalf("application ended %v %v before the status page showed every task running (last %+v, %v): %s", r.State, r.FinalStatus, last, lastErr, r.Diagnostics)
		}
		if r.State != yarn.AppRunning || !strings.HasPrefix(r.TrackingURL, "http") {
			continue
		}
		urls := []string{strings.TrimSuffix(r.TrackingURL, "/") + "/status.json"}
		// The mini cluster's ResourceManager builds the proxy's address
		// from its configuration before its web server bound a port
		// (localhost:0): ask the web server the client knows.
		if u, err := url.Parse(urls[0]); err == nil && u.Port() == "0" {
			if web, ok := cl.Conf.Get("yarn.resourcemanager.webapp.address"); ok && web != "" {
				u.Host = web
				urls = append([]string{u.String()}, urls...)
			}
		}
		for _, s := range hadooptest.ContainerFiles(t, id.String(), "stderr") {
			if m := statusURLRE.FindStringSubmatch(s); m != nil {
				urls = append(urls, m[1]+"status.json")
			}
		}
		for _, u := range urls {
			ws, err := fetch(u)
			if err != nil {
				lastErr = err
				continue
			}
			last, via = ws, u
			ok = ws.State == tracker.Running && len(ws.Roles) == 3
			for _, rs := range ws.Roles {
				ok = ok && rs == want[rs.Role]
			}
			break
		}
	}
	t.Logf("status via %s: %+v", via, last)
	if !strings.Contains(via, "/proxy/") {
		t.Logf("the ResourceManager's proxy did not answer (%v); read the AM's own address", lastErr)
	}
	if last.Name != "spindle-web" {
		t.Errorf("name %q", last.Name)
	}
	r := waitApp(ctx, t, rm, id)
	if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded {
		t.Errorf("state %v final status %v: %s", r.State, r.FinalStatus, r.Diagnostics)
	}
}

type httpError struct{ status, body string }

func (e *httpError) Error() string {
	b := e.body
	if len(b) > 300 {
		b = b[:300] + "…"
	}
	return e.status + ": " + b
}
