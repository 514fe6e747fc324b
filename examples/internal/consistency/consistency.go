// Package consistency holds the example trainers' flags for how workers
// keep step with each other: synchronous (the default: every worker's
// part of a step is applied before anyone pulls again), bounded delay
// (--staleness T) or asynchronous (--async), and whether a worker
// pipelines its mini-batches (--prefetch); and for what their tables
// send on the wire (--compress, --delta-keys, --key-cache, --significance).
package consistency

import (
	"errors"
	"flag"
	"fmt"
	"math"

	"github.com/spindle-ps/spindle/psnode"
)

// PrefetchDepth is how many mini-batches' pulls a prefetching worker has
// out ahead of the one it computes in a synchronous job, FreeDepth in an
// asynchronous or bounded-delay one: there a third batch out hides more
// of a pull's round trip, and the asynchronous 2 × 2 ps-lr job ran 2 to
// 6% faster (BENCHMARKS.md, "three mini-batches ahead"); a synchronous
// job gained nothing.
const (
	PrefetchDepth = 2
	FreeDepth     = 3
)

// Flags are the consistency flags.
type Flags struct {
	Async        bool    // --async
	Staleness    int     // --staleness: at least 0 for bounded delay; -1 when not given
	Prefetch     bool    // --prefetch
	Compress     bool    // --compress
	DeltaKeys    bool    // --delta-keys
	KeyCache     bool    // --key-cache
	Significance float64 // --significance: 0 off
}

// Register defines the flags on fl.
func (f *Flags) Register(fl *flag.FlagSet) {
	fl.BoolVar(&f.Async, "async", false, "asynchronous training: no step-wise aggregation, shards on demand")
	fl.IntVar(&f.Staleness, "staleness", -1, "bounded delay: a worker runs at most this many mini-batches ahead of the slowest (0: bulk-synchronous), shards on demand; exclusive with --async")
	fl.BoolVar(&f.Compress, "compress", false, "compress the tables' pushes and pulls on the wire, losslessly (delta-encoded keys, zstd)")
	fl.BoolVar(&f.DeltaKeys, "delta-keys", false, "send the tables' keys as gaps and everything else as it is, losslessly: fewer bytes for almost no CPU (--compress takes more bytes off with zstd, for much more CPU)")
	fl.BoolVar(&f.KeyCache, "key-cache", false, "compress like --compress and have the servers keep the key lists a worker sends, so that it sends a 16-byte signature instead of a list again (the push of a batch after its pull)")
	fl.Float64Var(&f.Significance, "significance", 0, "with --async or --staleness: push a key's gradient only once it adds up to this magnitude, holding the rest back until then or the end of the worker's shards (0: off)")
	fl.BoolVar(&f.Prefetch, "prefetch", true, "pull the next mini-batches' weights while the current one computes and pushes (synchronous jobs still write the same model: the servers hold such a pull until the step before is applied)")
}

// Check reports the flags' errors once fl, on which Register defined
// them, is parsed.
func (f Flags) Check(fl *flag.FlagSet) error {
	given := false
	fl.Visit(func(g *flag.Flag) { given = given || g.Name == "staleness" })
	var errs []error
	if given && f.Staleness < 0 {
		errs = append(errs, fmt.Errorf("--staleness %d: need at least 0", f.Staleness))
	}
	if given && f.Async {
		errs = append(errs, errors.New("--staleness and --async: give one (--async is unbounded delay)"))
	}
	if f.Significance < 0 || math.IsNaN(f.Significance) || math.IsInf(f.Significance, 0) {
		errs = append(errs, fmt.Errorf("--significance %v: want a finite number >= 0", f.Significance))
	} else if f.Significance > 0 && !f.Free() {
		errs = append(errs, fmt.Errorf("--significance %v: %w", f.Significance, ErrNeedsFreeMode))
	}
	return errors.Join(errs...)
}

// ErrNeedsFreeMode is the error of a filter given without --async or
// --staleness.
var ErrNeedsFreeMode = errors.New("needs --async or --staleness (a synchronous step sends every gradient)")

// Bounded says whether the job trains with bounded delay.
func (f Flags) Bounded() bool { return f.Staleness >= 0 }

// Free says whether workers run without step-wise aggregation
// (asynchronous or bounded delay) and take shards on demand.
func (f Flags) Free() bool { return f.Async || f.Bounded() }

// Depth is the depth of the worker's feed.Pipeline.
func (f Flags) Depth() int {
	switch {
	case !f.Prefetch:
		return 0
	case f.Free():
		return FreeDepth
	}
	return PrefetchDepth
}

// Table returns spec with the consistency the flags ask for.
func Table[V psnode.Number](f Flags, spec psnode.TableSpec[V]) psnode.TableSpec[V] {
	spec.Sync = !f.Free()
	spec.BoundedDelay = f.Bounded()
	spec.Staleness = max(f.Staleness, 0)
	spec.Compress = f.Compress
	spec.DeltaKeys = f.DeltaKeys
	spec.KeyCache = f.KeyCache
	spec.Significance = f.Significance
	return spec
}
