package yarnam

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

func TestStatusHandler(t *testing.T) {
	t.Parallel()
	st := tracker.NewState([]tracker.Shard{{ID: 0}, {ID: 1}}, time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	st.SetRole(tracker.RoleStatus{Role: conf.RoleScheduler, Want: 1, Running: 1})
	st.SetRole(tracker.RoleStatus{Role: conf.RoleWorker, Want: 3, Running: 2, Restarts: 1, Succeeded: 1})
	if err := st.ReportMetrics(0, 0, map[string]float64{"loss": 0.25}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(StatusHandler("spindle:<lr>", st))
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	resp, body := get("/status.json")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status.json: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var ws WebStatus
	if err := json.Unmarshal([]byte(body), &ws); err != nil {
		t.Fatalf("status.json %q: %v", body, err)
	}
	if ws.Name != "spindle:<lr>" || ws.State != tracker.Running || ws.ShardsTotal != 2 || ws.Metrics["loss"] != 0.25 {
		t.Errorf("status.json = %+v", ws)
	}
	wantRoles := []WebRoleStatus{{Role: conf.RoleScheduler, Want: 1, Running: 1}, {Role: conf.RoleWorker, Want: 3, Running: 2, Restarts: 1, Succeeded: 1}}
	if len(ws.Roles) != 2 || ws.Roles[0] != wantRoles[0] || ws.Roles[1] != wantRoles[1] {
		t.Errorf("roles = %+v, want %+v", ws.Roles, wantRoles)
	}
	for _, k := range []string{`"shards_done"`, `"roles"`, `"want"`, `"restarts"`} {
		if !strings.Contains(body, k) {
			t.Errorf("status.json has no %s: %s", k, body)
		}
	}
	if strings.Contains(strings.ToLower(body), "secret") {
		t.Errorf("status.json mentions a secret: %s", body)
	}

	resp, body = get("/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`<meta http-equiv="refresh"`, "spindle:&lt;lr&gt;", "RUNNING", "<td>worker</td><td>3</td><td>2</td><td>1</td><td>1</td>",
		"0 of 2 shards", "loss", "status.json"} {
		if !strings.Contains(body, want) {
			t.Errorf("page has no %q:\n%s", want, body)
		}
	}

	st.Finish(tracker.Failed, "worker 0 failed")
	if _, body = get("/status.json"); !strings.Contains(body, `"FAILED"`) || !strings.Contains(body, "worker 0 failed") {
		t.Errorf("status.json after the end = %s", body)
	}
	if resp, _ = get("/nothing"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nothing: %s, want 404", resp.Status)
	}
}

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
	rm, err := yarn.NewRMClient(ctx, cl.Conf, cl.User)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	bin := buildAMJob(t)
	spec := job.JobSpec{Name: "spindle-web", Command: []string{"/bin/sh", "-c", "sleep 20"}, NumWorkers: 2, NumServers: 1,
		MaxAttempts: 1, WorkerMemoryMB: 128, ServerMemoryMB: 128}
	id := submitAMJob(ctx, t, rm, bin, "spindle-amjob-web", spec, yarn.Submission{})
	client := &http.Client{Timeout: 5 * time.Second}
	fetch := func(u string) (WebStatus, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return WebStatus{}, err
		}
		// Skips the proxy's warning page for users other than the owner.
		req.AddCookie(&http.Cookie{Name: "checked_" + id.String(), Value: "true"})
		resp, err := client.Do(req)
		if err != nil {
			return WebStatus{}, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var ws WebStatus
		if resp.StatusCode != 200 {
			return ws, &httpError{resp.Status, string(b)}
		}
		return ws, json.Unmarshal(b, &ws)
	}
	want := map[conf.Role]WebRoleStatus{conf.RoleScheduler: {conf.RoleScheduler, 1, 1, 0, 0}, conf.RoleServer: {conf.RoleServer, 1, 1, 0, 0}, conf.RoleWorker: {conf.RoleWorker, 2, 2, 0, 0}}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last WebStatus
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
