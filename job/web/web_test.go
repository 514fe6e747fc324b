package web

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
)

func TestHandlerServesStatusAssetsAndLogs(t *testing.T) {
	t.Parallel()
	st := tracker.NewState([]tracker.Shard{{}, {}}, time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	st.SetRole(tracker.RoleStatus{Role: conf.RoleWorker, Want: 2, Running: 2, Restarts: 1})
	st.SetTasks([]tracker.TaskStatus{
		{Task: "worker 0", Role: conf.RoleWorker, Rank: 0, State: "running", Launches: 1, Node: "n1", Logs: "/logs"},
		{Task: "worker 1", Role: conf.RoleWorker, Rank: 1, State: "waiting", Attempt: 1, Launches: 2, Exit: "exit code 3"},
	}, 1)
	for e, m := range []map[string]float64{{"loss_sum": 6, "examples_count": 10, "test_auc": 0.7}, {"loss": 0.5}} {
		if err := st.ReportMetrics(e, 0, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.ShardDone(0, 1, 1, 0, 250); err != nil {
		t.Fatal(err)
	}
	opened := ""
	h := NewHandler(Options{Name: "spindle:<lr>", State: st, Logs: func(_ context.Context, task tracker.TaskStatus, stream string) (io.ReadCloser, error) {
		if task.Rank != 0 {
			return nil, fs.ErrNotExist
		}
		opened = task.Logs + " " + stream
		return io.NopCloser(strings.NewReader("line 1\nline 2\n")), nil
	}})
	h.Sample()
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, body := get("/status.json")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status.json: %s %v", resp.Status, resp.Header)
	}
	var s Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "spindle:<lr>" || s.State != tracker.Running || s.Failovers != 1 || len(s.Epochs) != 2 || len(s.Tasks) != 2 {
		t.Fatalf("status = %+v", s)
	}
	if e := s.Epochs[0]; e.Loss == nil || *e.Loss != 0.6 || e.AUC == nil || *e.AUC != 0.7 || e.At.IsZero() {
		t.Errorf("epoch 0 = %+v", e)
	}
	if e := s.Epochs[1]; e.Loss == nil || *e.Loss != 0.5 || e.AUC != nil {
		t.Errorf("epoch 1 = %+v", e)
	}
	if w := s.Speed.Workers; len(w) != 1 || w[0].Rank == 0 || w[0].Records != 250 || len(w[0].Rates) != 1 || len(s.Speed.Times) != 1 {
		t.Errorf("speed = %+v", s.Speed)
	}
	if tk := s.Tasks[1]; tk.Restarts != 1 || tk.Attempt != 1 || tk.Logs != "logs/worker/1/" || tk.Exit != "exit code 3" {
		t.Errorf("task 1 = %+v", tk)
	}
	if strings.Contains(strings.ToLower(body), "secret") {
		t.Errorf("status.json mentions a secret: %s", body)
	}

	resp, body = get("/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("/: %s %v", resp.Status, resp.Header)
	}
	for _, want := range []string{`src="assets/vendor/uplot/uPlot.iife.min.js"`, `src="assets/status.js"`, `id="chart-speed"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page has no %s", want)
		}
	}
	// Nothing the page loads comes from elsewhere.
	for _, path := range []string{"/assets/status.js", "/assets/status.css", "/assets/vendor/uplot/uPlot.iife.min.js", "/assets/vendor/uplot/uPlot.min.css"} {
		resp, body := get(path)
		if resp.StatusCode != 200 || len(body) == 0 {
			t.Errorf("%s: %s", path, resp.Status)
		}
		if path != "/assets/vendor/uplot/uPlot.iife.min.js" && strings.Contains(body, "http") {
			t.Errorf("%s refers to another site", path)
		}
	}

	if resp, body = get("/logs/worker/0/stderr"); resp.StatusCode != 200 || body != "line 1\nline 2\n" || opened != "/logs stderr" {
		t.Errorf("worker 0's stderr: %s %q (opened %q)", resp.Status, body, opened)
	}
	for _, path := range []string{"/logs/worker/1/stdout", "/logs/worker/7/stdout", "/logs/worker/0/other", "/logs/worker/x/stdout", "/nothing"} {
		if resp, _ := get(path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", path, resp.Status)
		}
	}
}

func TestLossAndAUC(t *testing.T) {
	t.Parallel()
	if v := Loss(map[string]float64{"loss_sum": 3, "examples_count": 0}); v != nil {
		t.Errorf("loss with no examples = %v", *v)
	}
	if v := Loss(map[string]float64{"loss_sum": 3, "examples_count": 0, "loss": 0.2}); v == nil || *v != 0.2 {
		t.Errorf("loss falls back on loss: %v", v)
	}
	if v := AUC(map[string]float64{"auc": 0.6, "test_auc": 0.8}); v == nil || *v != 0.8 {
		t.Errorf("AUC prefers test_auc: %v", v)
	}
}

// TestHistoryIsBoundedAndKeepsItsSpan: a long job's history stays within
// its bound, covers the whole job, and the speeds are right.
func TestHistoryIsBoundedAndKeepsItsSpan(t *testing.T) {
	t.Parallel()
	h := history{max: 100, every: 1}
	t0 := time.Unix(1_800_000_000, 0)
	var last time.Time
	for i := 0; i < 1000; i++ {
		last = t0.Add(time.Duration(i) * time.Second)
		recs := map[int]int64{0: int64(i) * 100}
		if i >= 500 {
			recs[1] = int64(i-500) * 50
		}
		h.add(last, recs)
	}
	sp := h.speed(map[int]int64{0: 99900, 1: 24950})
	if n := len(sp.Times); n > 100 || n < 50 {
		t.Fatalf("%d samples kept, want at most 100 and at least half", n)
	}
	if first, end := sp.Times[0], sp.Times[len(sp.Times)-1]; first != float64(t0.Unix()) || float64(last.Unix())-end > 16 {
		t.Errorf("samples span %v..%v, want about %v..%v", first, end, t0.Unix(), last.Unix())
	}
	if len(sp.Workers) != 2 {
		t.Fatalf("workers %+v", sp.Workers)
	}
	nils := 0
	for i, r := range sp.Workers[1].Rates {
		if r == nil {
			nils++
			continue
		}
		if i > 0 && sp.Workers[1].Rates[i-1] != nil && *r != 50 {
			t.Errorf("worker 1 at sample %d: %v/s, want 50", i, *r)
		}
	}
	if nils == 0 || nils == len(sp.Times) {
		t.Errorf("worker 1 missing from %d of %d samples; it came halfway", nils, len(sp.Times))
	}
	for i, r := range sp.Workers[0].Rates {
		if r == nil || (i > 0 && *r != 100) {
			t.Errorf("worker 0 at sample %d: %v, want 100/s", i, r)
		}
	}
}

// TestKillRequest: POST /kill asks the job to end KILLED when the page
// serves it, and answers with the job's state; a page without
// Options.Kill has no such route.
func TestKillRequest(t *testing.T) {
	t.Parallel()
	st := tracker.NewState(nil, time.Now())
	post := func(h http.Handler) (int, string) {
		t.Helper()
		srv := httptest.NewServer(h)
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/kill", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, _ := post(NewHandler(Options{State: st, Scale: true})); code != http.StatusMethodNotAllowed && code != http.StatusNotFound {
		t.Errorf("POST /kill on a page without it: %d", code)
	}
	select {
	case r := <-st.KillRequests():
		t.Fatalf("a page without Options.Kill asked for a kill: %q", r)
	default:
	}
	code, body := post(NewHandler(Options{State: st, Kill: true}))
	var rep KillReply
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil || rep.State != tracker.Running {
		t.Fatalf("POST /kill: %d %q, want 200 and the state RUNNING", code, body)
	}
	select {
	case r := <-st.KillRequests():
		if r != KillReason {
			t.Errorf("kill reason %q, want %q", r, KillReason)
		}
	default:
		t.Fatal("POST /kill did not ask the job to end")
	}
}

// TestScaleRequest: POST /scale asks the job for other numbers of
// servers and workers when the page serves it: refused with the job's
// reason before training and for a bad number, taken once a worker
// asked for a view; a page without Options.Scale has no such route.
func TestScaleRequest(t *testing.T) {
	t.Parallel()
	st := tracker.NewState(nil, time.Now())
	st.SetServers(2)
	st.SetWorkers(2)
	post := func(h http.Handler, form string) (int, string) {
		t.Helper()
		srv := httptest.NewServer(h)
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/scale", "application/x-www-form-urlencoded", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, _ := post(NewHandler(Options{State: st}), "servers=3"); code != http.StatusMethodNotAllowed && code != http.StatusNotFound {
		t.Errorf("POST /scale on a page without it: %d", code)
	}
	h := NewHandler(Options{State: st, Scale: true})
	if code, body := post(h, "servers=3"); code != http.StatusBadRequest || !strings.HasPrefix(body, "scale to 3 servers: the job has not started training yet") {
		t.Errorf("scale before training: %d %q", code, body)
	}
	st.View(0)
	for _, form := range []string{"servers=three", "", "servers=0", "workers=two", "servers=3&workers=300"} {
		if code, body := post(h, form); code != http.StatusBadRequest || !strings.HasPrefix(body, "scale") {
			t.Errorf("form %q: %d %q, want 400 saying why", form, code, body)
		}
	}
	code, body := post(h, "servers=3")
	var rep ScaleReply
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil || rep != (ScaleReply{Servers: 2, Target: 3, Workers: 2, WorkersTarget: 2}) {
		t.Fatalf("scale to 3: %d %q", code, body)
	}
	code, body = post(h, "workers=4")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil || rep != (ScaleReply{Servers: 2, Target: 3, Workers: 2, WorkersTarget: 4}) {
		t.Fatalf("scale to 4 workers: %d %q", code, body)
	}
	code, body = post(h, "servers=2&workers=3")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil || rep != (ScaleReply{Servers: 2, Target: 2, Workers: 2, WorkersTarget: 3}) {
		t.Fatalf("scale to 2 servers and 3 workers: %d %q", code, body)
	}
	if s := h.Status(); s.Servers != 2 || s.ServersTarget != 2 || s.Workers != 2 || s.WorkersTarget != 3 {
		t.Errorf("status servers %d target %d, workers %d target %d; want 2, 2, 2, 3", s.Servers, s.ServersTarget, s.Workers, s.WorkersTarget)
	}
}
