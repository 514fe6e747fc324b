package main

import (
	"context"
	"fmt"
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
	name := "lr-scale"
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
		asked    []int
		askErrs  []error
		requests = make(chan int, 2)
	)
	var out lockedBuf
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the requests, off the status callback
		defer wg.Done()
		for servers := range requests {
			mu.Lock()
			page := info
			mu.Unlock()
			err := askScale(ctx, page, servers)
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
			switch {
			case len(asked) == 0 && st.Epoch >= 1:
				asked = append(asked, 4)
				requests <- 4
			case len(asked) == 1 && len(eventsOf(st, tracker.EventScaled)) == 1:
				asked = append(asked, 2)
				requests <- 2
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
	if len(scaled) != 2 {
		t.Fatalf("scaled events %+v, want two (2 → 4, 4 → 2)\n%s", scaled, out.String())
	}
	for i, from := range []int{2, 4} {
		to := 6 - from
		share := movedShare(t, scaled[i], from, to)
		t.Logf("servers %d → %d: moved %.1f%% of the keys in %v (%s)", from, to, 100*share, scaled[i].Took.Round(time.Millisecond), scaled[i].Detail)
		if share < 0.45 || share > 0.55 {
			t.Errorf("servers %d → %d moved %.3f of the keys, want about 1/2 (consistent hashing)", from, to, share)
		}
	}
	retired := 0
	for _, task := range res.Tasks {
		switch {
		case task.Retired:
			retired++
		case task.Attempts != 1:
			t.Errorf("%s %d ran %d times, want once", task.Role, task.Rank, task.Attempts)
		}
	}
	if retired != 2 {
		t.Errorf("%d servers retired, want the 2 that joined", retired)
	}
	if left := jobProcesses(t, name); len(left) > 0 {
		t.Errorf("processes of the job left after it ended: %v", left)
	}
	checkSameModel(t, modelDir, want, "two changes of servers")
	parts, _ := filepath.Glob(filepath.Join(modelDir, "part-*"))
	if len(parts) != len(want.parts) {
		t.Errorf("%d model parts, want %d (the servers at the end)", len(parts), len(want.parts))
	}
}

// askScale asks the job's status page for servers servers.
func askScale(ctx context.Context, info local.Info, servers int) error {
	form := url.Values{"servers": {strconv.Itoa(servers)}}
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
		return fmt.Errorf("POST %sscale servers=%d: %s", info.URL, servers, resp.Status)
	}
	return nil
}

var movedRE = regexp.MustCompile(`\((\d+) of (\d+)\)`)

// movedShare reads the share of the keys a scaled event says moved.
func movedShare(t *testing.T, e tracker.Event, from, to int) float64 {
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
