package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/feed"
)

// TestFreeModesModelQuality trains with bounded delay and asynchronously,
// with and without prefetching, and with the communication filters:
// every run reaches the synchronous model's AUC within 0.002 and counts
// every record of each epoch; the significance filter sends at least a
// fifth fewer bytes to the servers than the same run without it, and
// the key cache (with compression) and the KKT filter at least half
// fewer bytes in all; with --cache-mb the workers read most of the second
// epoch's shards from memory.
func TestFreeModesModelQuality(t *testing.T) {
	run := syncJob(t)
	toServers, all := map[string]float64{}, map[string]float64{}
	for _, args := range [][]string{
		{"--staleness", "2", "--cache-mb", "64"},
		{"--staleness", "0", "--prefetch=false"},
		{"--async"},
		{"--async", "--significance", "0.5"},
		{"--staleness", "2", "--significance", "0.5"},
		{"--async", "--key-cache", "--kkt", "0.1"},
	} {
		r := runJob(t, 2, 2, 2<<20, append([]string{"--epochs", "2"}, args...)...)
		if r.err != nil {
			t.Fatalf("%q: %v\n%s", args, r.err, r.out)
		}
		for e := 0; e < 2; e++ {
			m := r.status.EpochMetrics[e]
			toServers[strings.Join(args, " ")] += m[feed.MetricBytesToServers]
			all[strings.Join(args, " ")] += m[feed.MetricBytesToServers] + m[feed.MetricBytesFromServers]
		}
		t.Logf("%q: AUC %.4f, synchronous %.4f", args, r.auc, run.auc)
		if d := r.auc - run.auc; d < -0.002 || d > 0.002 {
			t.Errorf("%q: AUC %.4f is %.4f from the synchronous run's %.4f", args, r.auc, d, run.auc)
		}
		for e := 0; e < 2; e++ {
			if got := r.status.EpochRecords[e]; got != int64(rows) {
				t.Errorf("%q: epoch %d counted %d records, want %d", args, e, got, rows)
			}
		}
		if slices.Contains(args, "--cache-mb") {
			checkCached(t, r.out)
		}
	}
	plain, filtered := toServers["--async"], toServers["--async --significance 0.5"]
	t.Logf("bytes to the servers over 2 epochs: asynchronous %.0f, with --significance 0.5 %.0f", plain, filtered)
	if filtered <= 0 || filtered > 0.8*plain {
		t.Errorf("with --significance 0.5, %.0f bytes to the servers against %.0f without; want at least a fifth fewer", filtered, plain)
	}
	plain, filtered = all["--async"], all["--async --key-cache --kkt 0.1"]
	t.Logf("bytes on the wire over 2 epochs: asynchronous %.0f, with --key-cache --kkt 0.1 %.0f", plain, filtered)
	if filtered <= 0 || filtered > 0.5*plain {
		t.Errorf("with --key-cache --kkt 0.1, %.0f bytes on the wire against %.0f without; want at least half fewer", filtered, plain)
	}
}

// cachedRE finds what a worker read from its cache in the second epoch
// (--cache-mb).
var cachedRE = regexp.MustCompile(`msg="data cache: shards read from memory" cached=([0-9]+) shards=([0-9]+)`)

// checkCached checks that a job's two workers read most of the second
// epoch's shards from their caches (--cache-mb): shards handed out on
// demand go first to the worker that read them the epoch before. A
// worker may still take some of the other's, when the other is slower
// to start the epoch.
func checkCached(t *testing.T, out string) {
	t.Helper()
	lines := cachedRE.FindAllStringSubmatch(out, -1)
	if len(lines) != 2 {
		t.Fatalf("%d workers said what they read from the cache, want 2:\n%s", len(lines), out)
	}
	cached, shards := 0, 0
	for _, m := range lines {
		c, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		cached, shards = cached+c, shards+n
	}
	t.Logf("the workers read %d of the second epoch's %d shards from their caches", cached, shards)
	if shards == 0 || 2*cached <= shards {
		t.Errorf("the workers read %d of the second epoch's %d shards from their caches, want more than half", cached, shards)
	}
}
