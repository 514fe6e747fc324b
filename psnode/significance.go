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

// residuals are a worker's values held back by the filter.
type residuals[V Number] struct {
	theta float64
	width int

	mu       sync.Mutex
	held     map[uint64][]V
	withheld uint64 // values held back by pushes, in all
}

func newResiduals[V Number](theta float64, width int) *residuals[V] {
	return &residuals[V]{theta: theta, width: width, held: make(map[uint64][]V)}
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
		if r.passes(v) {
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

func (r *residuals[V]) passes(v []V) bool {
	for _, x := range v {
		if math.Abs(float64(x)) >= r.theta {
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

// Withheld returns how many values this worker's pushes of a table with
// the significantly-modified filter held back (each later sent, added
// up, with the key's next push or at Idle); 0 for other tables.
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
