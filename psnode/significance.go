package psnode

import (
	"context"
	"math"
	"slices"
	"sync"
)

// The significantly-modified filter (TableSpec.Significance θ > 0, on
// asynchronous and bounded-delay tables) cuts the values a worker pushes:
// Push and PushAt send a key's values only once one of them, added to
// what the worker held back for that key, reaches θ in magnitude; the
// others are held back and added to the key's next push. Idle (and
// Tables.Idle, which a feed's Idle hook calls when the worker has no
// shard left) sends everything held back, so that at the end of every
// epoch the servers have applied the sum of every value pushed: the
// filter changes when an update arrives, not what arrives.

// The KKT filter (TableSpec.KKT λ > 0, for L1-regularised models on
// asynchronous and bounded-delay tables) holds back the values pushed for
// a key whose weight was zero in this worker's last pull until they add
// up to λ in magnitude: the L1 penalty keeps a zero weight at zero against
// smaller gradients (the optimality condition the filter is named after),
// so these are the gradients least likely to move anything. What it holds
// goes out as the significance filter's does: with the key's next push
// that passes, or at Idle.

// residuals are a worker's values held back by the filters.
type residuals[V Number] struct {
	theta, kkt float64 // 0: that filter off
	width      int

	mu       sync.Mutex
	held     map[uint64][]V
	zero     map[uint64]bool // KKT: keys whose weight the last pull read as zero
	withheld uint64          // values held back by pushes, in all
}

func newResiduals[V Number](theta, kkt float64, width int) *residuals[V] {
	return &residuals[V]{theta: theta, kkt: kkt, width: width, held: make(map[uint64][]V), zero: make(map[uint64]bool)}
}

// noteWeights records which of keys have a zero weight in vals.
func (r *residuals[V]) noteWeights(keys []uint64, vals []V) {
	if len(vals) != len(keys)*r.width {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, k := range keys {
		z := true
		for _, x := range vals[i*r.width : (i+1)*r.width] {
			z = z && x == 0
		}
		if z {
			r.zero[k] = true
		} else {
			delete(r.zero, k)
		}
	}
}

// watchPull adds to a pull's options what the KKT filter needs to see
// its weights.
func (t *Table[V]) watchPull(keys []uint64, vals *[]V, opts ...CallOption) []CallOption {
	if t.sig == nil || t.sig.kkt == 0 {
		return opts
	}
	ks := slices.Clone(keys) // keys may be reused once Pull returns
	return append(opts, afterPull(func() { t.sig.noteWeights(ks, *vals) }))
}

// filter returns the keys of a push whose values, with what was held
// back for them, pass the threshold, and those sums; it holds back the
// rest. keys keep their order.
func (r *residuals[V]) filter(keys []uint64, vals []V) ([]uint64, []V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.width
	outK := make([]uint64, 0, len(keys))
	outV := make([]V, 0, len(vals))
	for i, k := range keys {
		v := vals[i*w : (i+1)*w]
		acc, held := r.held[k]
		if held {
			for j := range acc {
				acc[j] += v[j]
			}
			v = acc
		}
		if r.passes(k, v) {
			outK = append(outK, k)
			outV = append(outV, v...)
			if held {
				delete(r.held, k)
			}
			continue
		}
		if !held {
			r.held[k] = slices.Clone(v)
		}
		r.withheld += uint64(w)
	}
	return outK, outV
}

// passes says whether key k's values v (with what was held back) go out
// now.
func (r *residuals[V]) passes(k uint64, v []V) bool {
	if r.kkt > 0 && r.zero[k] && !reaches(v, r.kkt) {
		return false
	}
	return r.theta == 0 || reaches(v, r.theta)
}

// reaches says whether one of v reaches bound in magnitude.
func reaches[V Number](v []V, bound float64) bool {
	for _, x := range v {
		if math.Abs(float64(x)) >= bound {
			return true
		}
	}
	return false
}

// drain returns everything held back, keys ascending, and forgets it.
func (r *residuals[V]) drain() ([]uint64, []V) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]uint64, 0, len(r.held))
	for k := range r.held {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]V, 0, len(keys)*r.width)
	for _, k := range keys {
		vals = append(vals, r.held[k]...)
	}
	clear(r.held)
	return keys, vals
}

// Withheld returns how many values this worker's pushes held back with
// the significance and KKT filters (each later sent, added up, with the
// key's next push or at Idle); 0 for tables without them.
func (t *Table[V]) Withheld() uint64 {
	if t.sig == nil {
		return 0
	}
	t.sig.mu.Lock()
	defer t.sig.mu.Unlock()
	return t.sig.withheld
}

// flushHeld pushes what an asynchronous table's filter held back.
func (t *Table[V]) flushHeld(ctx context.Context, _ int) (int32, error) {
	keys, vals := t.sig.drain()
	return t.kv.Push(ctx, KVPairs[V]{Keys: keys, Vals: vals})
}
