package main

import "testing"

// TestFreeModesModelQuality trains with bounded delay and asynchronously,
// with and without prefetching: every run reaches the synchronous
// model's AUC within 0.002 and counts every record of each epoch.
func TestFreeModesModelQuality(t *testing.T) {
	runs, _ := syncJobs(t)
	for _, args := range [][]string{
		{"--staleness", "2"},
		{"--staleness", "0", "--prefetch=false"},
		{"--async"},
	} {
		r := runJob(t, 2, 2, 2<<20, append([]string{"--epochs", "2"}, args...)...)
		if r.err != nil {
			t.Fatalf("%q: %v\n%s", args, r.err, r.out)
		}
		t.Logf("%q: AUC %.4f, synchronous %.4f", args, r.auc, runs[0].auc)
		if d := r.auc - runs[0].auc; d < -0.002 || d > 0.002 {
			t.Errorf("%q: AUC %.4f is %.4f from the synchronous run's %.4f", args, r.auc, d, runs[0].auc)
		}
		for e := 0; e < 2; e++ {
			if got := r.status.EpochRecords[e]; got != int64(rows) {
				t.Errorf("%q: epoch %d counted %d records, want %d", args, e, got, rows)
			}
		}
	}
}
