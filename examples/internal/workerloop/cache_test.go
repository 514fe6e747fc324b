package workerloop

import (
	"flag"
	"testing"
)

// TestCacheBytes checks the budget of a worker's cache of examples: a
// quarter of its memory by default, the launcher's figure when it gave
// one, and exactly --cache-mb otherwise (0 turns the cache off).
func TestCacheBytes(t *testing.T) {
	var d Data
	fl := flag.NewFlagSet("t", flag.ContinueOnError)
	d.Register(fl)
	if err := fl.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if errs := d.Check(); len(errs) > 0 {
		t.Fatalf("defaults: %v", errs)
	}
	tests := []struct {
		cacheMB, memMB int
		want           int64
	}{
		{d.CacheMB, 4096, 1 << 30},
		{d.CacheMB, 1024, 256 << 20},
		{d.CacheMB, 0, 256 << 20}, // launched by hand: a default container's
		{0, 4096, 0},
		{64, 4096, 64 << 20},
		{64, 0, 64 << 20},
	}
	for _, tt := range tests {
		d.CacheMB = tt.cacheMB
		if got := d.CacheBytes(tt.memMB); got != tt.want {
			t.Errorf("--cache-mb %d with %d MB: %d bytes, want %d", tt.cacheMB, tt.memMB, got, tt.want)
		}
	}
}
