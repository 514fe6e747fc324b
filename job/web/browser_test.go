package web_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/browsertest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/tracker"
)

var screenshot = flag.String("screenshot", "", "save the running local job's page as this PNG (the README's docs/status-page.png)")

// figure returns the attributes of the chart figure id in dom.
func figure(t *testing.T, dom, id string) (series string, points int) {
	t.Helper()
	s, n, ok := browsertest.Figure(dom, id)
	if !ok {
		t.Fatalf("no figure %s with data-series and data-points in the page:\n%s", id, dom)
	}
	return s, n
}

// loadDrawn loads url until the page has drawn its data.
func loadDrawn(t *testing.T, ctx context.Context, b *browsertest.Browser, url string) string {
	t.Helper()
	dom, err := b.LoadDrawn(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return dom
}

// TestStatusPageWithoutData: a job that has no task placed and no
// metrics yet still draws, every chart empty, with no error shown.
func TestStatusPageWithoutData(t *testing.T) {
	b := browsertest.New(t)
	st := tracker.NewState(nil, time.Now())
	srv := httptest.NewServer(web.NewHandler(web.Options{Name: "empty", State: st}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dom := loadDrawn(t, ctx, b, srv.URL+"/")
	for _, id := range []string{"chart-epoch", "chart-time", "chart-speed"} {
		if _, n := figure(t, dom, id); n != 0 {
			t.Errorf("%s has %d points, want 0", id, n)
		}
		if !regexp.MustCompile(`<figure id="` + id + `" class="chart nodata"`).MatchString(dom) {
			t.Errorf("%s is not marked as without data", id)
		}
	}
	if s, _ := figure(t, dom, "chart-epoch"); s != "loss,AUC" {
		t.Errorf("epoch chart series %q", s)
	}
	if !strings.Contains(dom, `<p id="error" hidden="">`) {
		t.Errorf("the page shows an error:\n%s", dom)
	}
	if !strings.Contains(dom, `<p id="no-events" class="empty-note">No task has failed.</p>`) {
		t.Errorf("the page does not say that no task failed:\n%s", dom)
	}
}

// buildTrainsim builds the test trainer.
func buildTrainsim(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trainsim")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/spindle-ps/spindle/internal/testprog/trainsim").CombinedOutput()
	if err != nil {
		t.Fatalf("build trainsim: %v\n%s", err, out)
	}
	return bin
}

// writeInput writes a data file of lines lines and returns its path.
func writeInput(t *testing.T, lines int) string {
	t.Helper()
	var sb strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&sb, "%d 1:%d 2:0.5 3:%d\n", i%2, i, i*7)
	}
	p := filepath.Join(t.TempDir(), "train.libsvm")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func getStatus(ctx context.Context, url, token string) (web.Status, error) {
	var st web.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"status.json", nil)
	if err != nil {
		return st, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("%s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// TestStatusPageOfALocalJob loads the page of a running local job whose
// worker 1 fails once and starts again, once the job has several epochs
// of metrics and both workers' speeds: the charts hold the series and
// points, the tasks table the restart, the log links the tasks' output.
func TestStatusPageOfALocalJob(t *testing.T) {
	b := browsertest.New(t)
	bin := buildTrainsim(t)
	input := writeInput(t, 400)
	until := filepath.Join(t.TempDir(), "stop")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := logrus.New()
	l.Out = io.Discard
	if os.Getenv("DEBUGJOB") != "" {
		l.Out = os.Stderr
		l.SetLevel(logrus.DebugLevel)
	}
	dir := filepath.Join(t.TempDir(), "job")
	started := make(chan local.Info, 1)
	type result struct {
		res job.Result
		err error
	}
	ended := make(chan result, 1)
	go func() {
		res, err := local.Run(ctx, job.JobSpec{Name: "browser", Command: []string{bin, "--until", until, "--pace", "20ms", "--fail-worker", "1"},
			NumWorkers: 2, MaxAttempts: 2, Inputs: []string{input}, SplitSize: 512},
			local.Options{Environ: os.Environ(), Log: logrus.NewEntry(l), Dir: dir, StopGrace: time.Second,
				Planner: tracker.InputPlanner(dfs.NewResolver(conf.HadoopConf{}, "")),
				OnStart: func(i local.Info) { started <- i }})
		ended <- result{res, err}
	}()
	var info local.Info
	select {
	case info = <-started:
	case r := <-ended:
		t.Fatalf("job ended before it started: %v %v", r.res.State, r.err)
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		_ = os.WriteFile(until, nil, 0o644)
		select {
		case <-ended:
		case <-ctx.Done():
		}
	}()
	// Wait until the job has what the page should show.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var st web.Status
	for ready := false; !ready; {
		select {
		case <-ctx.Done():
			t.Fatalf("the job never had 3 epochs, both workers' speeds and worker 1's restart: %+v", st)
		case r := <-ended:
			t.Fatalf("job ended early: %v %v", r.res.State, r.err)
		case <-tick.C:
		}
		var err error
		if st, err = getStatus(ctx, info.URL, info.Token); err != nil {
			continue
		}
		ready = len(st.Epochs) >= 3 && len(st.Speed.Workers) == 2 && len(st.Speed.Times) >= 3 && len(st.Events) >= 2
		for _, task := range st.Tasks {
			if task.Task == "worker 1" && (task.Restarts != 1 || task.State != "running") {
				ready = false
			}
		}
	}

	// status.json has worker 1's exit, then its return with the time it
	// was down.
	var exited, back *web.Event
	for i, e := range st.Events {
		switch {
		case e.Task == "worker 1" && e.Kind == tracker.EventExited && exited == nil:
			exited = &st.Events[i]
		case e.Task == "worker 1" && e.Kind == tracker.EventBack && exited != nil && back == nil:
			back = &st.Events[i]
		}
	}
	if exited == nil || back == nil {
		t.Fatalf("events %+v: want worker 1's exit, then its return", st.Events)
	}
	if d := back.At.Sub(exited.At).Seconds(); back.TookSeconds <= 0 || back.TookSeconds > d+0.001 {
		t.Errorf("worker 1 back after %.3f s, but its events are %.3f s apart", back.TookSeconds, d)
	}

	t0 := time.Now()
	t.Logf("job ready after %v", time.Since(info.Started))
	dom := loadDrawn(t, ctx, b, info.PageURL())
	t.Logf("page loaded in %v", time.Since(t0))
	if s, n := figure(t, dom, "chart-epoch"); s != "loss,AUC" || n < 3 {
		t.Errorf("epoch chart: series %q, %d points; want loss,AUC and 3 or more", s, n)
	}
	if s, n := figure(t, dom, "chart-time"); s != "loss,AUC" || n < 3 {
		t.Errorf("time chart: series %q, %d points; want loss,AUC and 3 or more", s, n)
	}
	if s, n := figure(t, dom, "chart-speed"); s != "worker 0,worker 1" || n < 3 {
		t.Errorf("speed chart: series %q, %d points; want worker 0,worker 1 and 3 or more", s, n)
	}
	// uPlot made its charts: canvases and legends naming the series.
	if c := strings.Count(dom, `<canvas`); c != 3 {
		t.Errorf("%d canvases, want 3", c)
	}
	for _, want := range []string{">loss<", ">AUC<", ">worker 0<", ">worker 1<",
		`<tr class="running" data-task="worker 1"><td>worker 1</td><td>running</td><td class="num">1</td><td class="num">1</td>`,
		`href="logs/worker/0/stdout"`, `href="logs/worker/1/stderr"`, `data-state="RUNNING"`,
		// The events: worker 1's failure, and its return with how long it took.
		`<tr class="event-exited"><td>`, `</td><td>worker 1</td><td>exited</td><td class="num"></td><td>exit code 3`,
		`</td><td>worker 1</td><td>running again</td><td class="num">`, `</td><td>running again (attempt 1) in `,
		`<p id="no-events" class="empty-note" hidden="">`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page has no %s:\n%s", want, dom)
		}
	}
	// Without the token the page refuses; with it, the links lead to the
	// tasks' output.
	if resp, err := http.Get(info.URL + "status.json"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("status.json without the token: %s, want 403 Forbidden", resp.Status)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, info.URL+"logs/worker/0/stdout", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), "worker 0 epoch 0 shard ") {
		t.Errorf("worker 0's stdout: %s %q", resp.Status, out)
	}

	shot := filepath.Join(t.TempDir(), "status-page.png")
	if *screenshot != "" {
		shot = *screenshot
	}
	if err := b.Screenshot(ctx, info.PageURL(), shot); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Errorf("screenshot %s: %v, %d bytes", shot, err, fi.Size())
	}

	t.Logf("screenshot after %v", time.Since(t0))
	if err := os.WriteFile(until, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-ended:
		finished = true
	case <-ctx.Done():
		t.Fatal("the job did not end once told to")
	}
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("job: %v %v", r.res.State, r.err)
	}
	// The directory keeps what ps-submit status and logs read.
	var final web.Status
	b2, err := os.ReadFile(filepath.Join(dir, local.StatusFile))
	if err == nil {
		err = json.Unmarshal(b2, &final)
	}
	if err != nil || final.State != tracker.Succeeded || len(final.Epochs) < 3 {
		t.Errorf("status file: %v %+v", err, final)
	}
	for _, name := range []string{"worker-1.0.stderr", "worker-1.1.stderr", "worker-0.0.stdout"} {
		if _, err := os.Stat(filepath.Join(dir, local.LogsDir, name)); err != nil {
			t.Error(err)
		}
	}
}
