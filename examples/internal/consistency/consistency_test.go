package consistency

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/psnode"
)

func parse(args ...string) (Flags, error) {
	var f Flags
	fl := flag.NewFlagSet("test", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	f.Register(fl)
	if err := fl.Parse(args); err != nil {
		return f, err
	}
	return f, f.Check(fl)
}

func TestFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--staleness", "2", "--async"}, "--staleness and --async"},
		{[]string{"--staleness", "-3"}, "--staleness -3: need at least 0"},
		{[]string{"--staleness", "-1"}, "--staleness -1: need at least 0"},
		{[]string{"--significance", "0.5"}, "--significance 0.5: needs --async or --staleness"},
		{[]string{"--async", "--significance", "-1"}, "--significance -1: want a finite number >= 0"},
	} {
		if _, err := parse(tt.args...); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: error %v, want one saying %q", tt.args, err, tt.err)
		}
	}
	for _, tt := range []struct {
		args                     []string
		sync, bounded, staleness int
		depth                    int
	}{
		{nil, 1, 0, 0, PrefetchDepth},
		{[]string{"--prefetch=false"}, 1, 0, 0, 0},
		{[]string{"--async"}, 0, 0, 0, FreeDepth},
		{[]string{"--staleness", "0", "--prefetch=false"}, 0, 1, 0, 0},
		{[]string{"--staleness", "3"}, 0, 1, 3, FreeDepth},
	} {
		f, err := parse(tt.args...)
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		spec := Table(f, psnode.TableSpec[float32]{Name: "w"})
		if b2i(spec.Sync) != tt.sync || b2i(spec.BoundedDelay) != tt.bounded || spec.Staleness != tt.staleness || f.Depth() != tt.depth || spec.Name != "w" {
			t.Errorf("%q: spec sync %v bounded %v staleness %d, depth %d", tt.args, spec.Sync, spec.BoundedDelay, spec.Staleness, f.Depth())
		}
		if spec.Compress || spec.KeyCache || spec.Significance != 0 {
			t.Errorf("%q: compress %v, significance %v by default", tt.args, spec.Compress, spec.Significance)
		}
		if f.Free() == spec.Sync {
			t.Errorf("%q: Free %v with Sync %v", tt.args, f.Free(), spec.Sync)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestFilterFlags(t *testing.T) {
	f, err := parse("--async", "--compress", "--key-cache", "--significance", "0.25")
	if err != nil {
		t.Fatal(err)
	}
	if spec := Table(f, psnode.TableSpec[float32]{}); !spec.Compress || !spec.KeyCache || spec.Significance != 0.25 {
		t.Errorf("compress %v, key cache %v, significance %v; want true, true and 0.25", spec.Compress, spec.KeyCache, spec.Significance)
	}
}
