package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
)

// scaleEpochs is the length of the scaling jobs: the servers go to 4 at
// the first epoch boundary after the request made in epoch 1, and back
// to 2 at the first after the one made once that change is done.
const scaleEpochs = "6"

// TestScaleServersOutAndBack: a synchronous 2×2 job with --partitioner
// consistent goes from 2 servers to 4 and back to 2 while it trains, at
// the requests of its status page (as `ps-submit scale` makes them). It
// succeeds with no task started again; its model is bit for bit the
// model of the same job never scaled; each change reports the share of
// the keys it moved, close to consistent hashing's 1/2 (2 → 4: the keys
// of the two new servers; 4 → 2: the same keys back); the two servers
// that joined retired; and no process of the job is left.
func TestScaleServersOutAndBack(t *testing.T) {
	args := []string{"--epochs", scaleEpochs, "--partitioner", "consistent"}
	want := runJob(t, 2, 2, 2<<20, args...)
	res, modelDir, scaled := scaledJob(t, "lr-scale-servers", args, scaleAsk{servers: 4}, scaleAsk{servers: 2})
	for i, from := range []int{2, 4} {
		to := 6 - from
		share := movedShare(t, scaled[i], from, to)
		t.Logf("servers %d → %d: moved %.1f%% of the keys in %v (%s)", from, to, 100*share, scaled[i].Took.Round(time.Millisecond), scaled[i].Detail)
		if share < 0.45 || share > 0.55 {
			t.Errorf("servers %d → %d moved %.3f of the keys, want about 1/2 (consistent hashing)", from, to, share)
		}
	}
	checkRetired(t, res, conf.RoleServer, 2)
	checkSameModel(t, modelDir, want, "two changes of servers")
	parts, _ := filepath.Glob(filepath.Join(modelDir, "part-*"))
	if len(parts) != len(want.parts) {
		t.Errorf("%d model parts, want %d (the servers at the end)", len(parts), len(want.parts))
	}
}

// TestScaleWorkersOutAndBack: the same job goes from 2 workers to 3 and
// back to 2 while it trains. It succeeds with no task started again;
// every epoch counts every record once, whichever workers read it; the
// worker that joined retired; and the model scores within 0.002 AUC of
// the job never scaled (the steps' sums differ as the shards are split
// otherwise, so the weights are not the same bit for bit).
func TestScaleWorkersOutAndBack(t *testing.T) {
	args := []string{"--epochs", scaleEpochs, "--partitioner", "consistent"}
	want := runJob(t, 2, 2, 2<<20, args...)
	res, modelDir, scaled := scaledJob(t, "lr-scale-workers", args, scaleAsk{workers: 3}, scaleAsk{workers: 2})
	for i, d := range []string{"workers 2 → 3", "workers 3 → 2"} {
		if !strings.Contains(scaled[i].Detail, d) {
			t.Errorf("change %d: %q, want %s", i, scaled[i].Detail, d)
		}
	}
	rows := int64(countLines(t, filepath.Join(dataDir, "train.libsvm")))
	epochs, _ := strconv.Atoi(scaleEpochs)
	for e := range epochs {
		if got := res.Status.EpochRecords[e]; got != rows {
			t.Errorf("epoch %d counted %d records, want %d", e, got, rows)
		}
	}
	checkRetired(t, res, conf.RoleWorker, 1)
	auc := evalAUC(t, modelDir, func(string) (string, bool) { return "", false })
	t.Logf("test AUC %.4f after two changes of workers, %.4f without", auc, want.auc)
	if math.Abs(auc-want.auc) > 0.002 {
		t.Errorf("AUC %.4f after two changes of workers, %.4f without: more than 0.002 apart", auc, want.auc)
	}
}

// scaleAsk is a request for servers servers and workers workers (0:
// unchanged).
type scaleAsk struct{ servers, workers int }

// scaledJob runs the synchronous 2×2 job with args, asks its page for the
// first change once epoch 1 has begun and for each next one once the
// change before is done, and returns its result, its model's directory
// and the changes' events. The job must succeed, with every change done
// and no process left.
func scaledJob(t testing.TB, name string, args []string, asks ...scaleAsk) (job.Result, string, []tracker.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	modelDir := filepath.Join(t.TempDir(), "model")
	spec := job.JobSpec{
		Name:        name,
		Command:     append([]string{psLR}, args...),
		NumWorkers:  2,
		NumServers:  2,
		MaxAttempts: 1,
		Inputs:      []string{filepath.Join(dataDir, "train.libsvm")},
		SplitSize:   2 << 20,
		Output:      modelDir,
	}
	r := localResolverForTest(t)
	var (
		mu       sync.Mutex
		info     local.Info
		asked    int
		askErrs  []error
		requests = make(chan scaleAsk, len(asks))
	)
	var out syncbuf.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the requests, off the status callback
		defer wg.Done()
		for a := range requests {
			mu.Lock()
			page := info
			mu.Unlock()
			err := askScale(ctx, page, a)
			mu.Lock()
			askErrs = append(askErrs, err)
			mu.Unlock()
		}
	}()
	res, err := local.Run(ctx, spec, local.Options{
		Environ: os.Environ(), Stdout: &out, Log: quietLog(), Planner: tracker.InputPlanner(r), Resolver: r,
		OnStart: func(i local.Info) {
			mu.Lock()
			info = i
			mu.Unlock()
		},
		OnStatus: func(st tracker.Status) {
			mu.Lock()
			defer mu.Unlock()
			if asked < len(asks) && st.Epoch >= 1 && len(eventsOf(st, tracker.EventScaled)) == asked {
				requests <- asks[asked]
				asked++
			}
		},
	})
	close(requests)
	wg.Wait()
	if err != nil {
		t.Fatalf("the job that scaled: %v\n%s", err, out.String())
	}
	for _, err := range askErrs {
		if err != nil {
			t.Errorf("a scale request: %v", err)
		}
	}
	scaled := eventsOf(res.Status, tracker.EventScaled)
	if len(scaled) != len(asks) {
		t.Fatalf("scaled events %+v, want %d\n%s", scaled, len(asks), out.String())
	}
	if left := jobProcesses(t, name); len(left) > 0 {
		t.Errorf("processes of the job left after it ended: %v", left)
	}
	return res, modelDir, scaled
}

// checkRetired checks that n tasks of role retired, those that joined,
// and that no task ran more than once.
func checkRetired(t testing.TB, res job.Result, role conf.Role, n int) {
	t.Helper()
	retired := 0
	for _, task := range res.Tasks {
		switch {
		case task.Retired && task.Role == role:
			retired++
		case task.Retired:
			t.Errorf("%s %d retired", task.Role, task.Rank)
		case task.Attempts != 1:
			t.Errorf("%s %d ran %d times, want once", task.Role, task.Rank, task.Attempts)
		}
	}
	if retired != n {
		t.Errorf("%d %ss retired, want the %d that joined", retired, role, n)
	}
}

// askScale asks the job's status page for a change.
func askScale(ctx context.Context, info local.Info, a scaleAsk) error {
	form := url.Values{}
	if a.servers > 0 {
		form.Set("servers", strconv.Itoa(a.servers))
	}
	if a.workers > 0 {
		form.Set("workers", strconv.Itoa(a.workers))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, info.URL+"scale", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %sscale %s: %s", info.URL, form.Encode(), resp.Status)
	}
	return nil
}

var movedRE = regexp.MustCompile(`\((\d+) of (\d+)\)`)

// movedShare reads the share of the keys a scaled event says moved.
func movedShare(t testing.TB, e tracker.Event, from, to int) float64 {
	t.Helper()
	if !strings.Contains(e.Detail, fmt.Sprintf("servers %d → %d", from, to)) {
		t.Fatalf("scaled event %q, want servers %d → %d", e.Detail, from, to)
	}
	m := movedRE.FindStringSubmatch(e.Detail)
	if m == nil {
		t.Fatalf("scaled event %q says no count of keys", e.Detail)
	}
	moved, _ := strconv.Atoi(m[1])
	keys, _ := strconv.Atoi(m[2])
	if keys == 0 {
		t.Fatalf("scaled event %q: no keys", e.Detail)
	}
	return float64(moved) / float64(keys)
}

// BenchmarkScaleServers runs the synchronous 2×2 job with --partitioner
// consistent undisturbed and then with its servers going 2 → 4 → 2, and
// reports each change's time (from the first worker's request to the
// switch) and share of the keys moved, beside both jobs' wall times.
func BenchmarkScaleServers(b *testing.B) {
	args := []string{"--epochs", scaleEpochs, "--partitioner", "consistent"}
	var wall, scaledWall, out, in time.Duration
	var shareOut, shareIn float64
	for i := 0; i < b.N; i++ {
		start := time.Now()
		mod := func(s *job.JobSpec) { s.Command = append([]string{psLR}, args...) }
		if res, err, log := killedJobSpec(b, psLR, fmt.Sprintf("lr-bench-unscaled-%d", i), "", mod, nil); err != nil || res.State != tracker.Succeeded {
			b.Fatalf("undisturbed job: %v %v\n%s", res.State, err, log)
		}
		wall += time.Since(start)
		start = time.Now()
		_, _, scaled := scaledJob(b, fmt.Sprintf("lr-bench-scaled-%d", i), args, scaleAsk{servers: 4}, scaleAsk{servers: 2})
		scaledWall += time.Since(start)
		out += scaled[0].Took
		in += scaled[1].Took
		shareOut += movedShare(b, scaled[0], 2, 4)
		shareIn += movedShare(b, scaled[1], 4, 2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(out.Milliseconds())/n, "ms-switch-2-to-4")
	b.ReportMetric(float64(in.Milliseconds())/n, "ms-switch-4-to-2")
	b.ReportMetric(shareOut/n, "share-moved-2-to-4")
	b.ReportMetric(shareIn/n, "share-moved-4-to-2")
	b.ReportMetric(wall.Seconds()/n, "s-wall-undisturbed")
	b.ReportMetric(scaledWall.Seconds()/n, "s-wall-scaled")
}
