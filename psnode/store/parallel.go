package store

import (
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// A large Update or Gather runs on several goroutines. Its time goes in
// waiting for memory at random places of a table much larger than the
// cache, and one core keeps only so many of those waits in flight, even
// with a group of keys loaded at once: on two cores the rate about
// doubles (BENCHMARKS.md, "The sum store on two cores").
const (
	// parallelMin is the fewest keys an Update or Gather splits:
	// below it starting the goroutines costs more than they save.
	parallelMin = 1 << 16
	// maxParts bounds the goroutines of one Update or Gather.
	maxParts = 8
)

// partsFor is the number of goroutines for an Update or Gather of n keys:
// a power of two, at most GOMAXPROCS and maxParts; 1 below parallelMin.
func partsFor(n int) int {
	if n < parallelMin {
		return 1
	}
	p := min(runtime.GOMAXPROCS(0), maxParts)
	return 1 << (bits.Len(uint(p)) - 1)
}

// pure reports whether upd is one of this package's updaters, whose
// Apply reads only its arguments and writes only w and s: it may run for
// different keys at once. Another Updater is applied by one goroutine.
func pure[V Number](upd Updater[V]) bool {
	switch upd.(type) {
	case Sum[V], SGD[V], AdaGrad[V], FTRL[V], Adam[V]:
		return true
	}
	return false
}

// updateParallel is Update's loop on parts goroutines (a power of two,
// 2 or more) for a hash table without an init function and a pure
// updater. Goroutine p takes the keys whose hashes' top bits are p, in
// their order in keys: every update of a key comes from one goroutine,
// in turn, and no two goroutines write one slot, so every key ends with
// the values and state of the serial loop, bit for bit (its slot may
// differ, as the order of insertion does). A probe may run into another
// goroutine's keys, so the key slots are read atomically and a free one
// is taken with a compare-and-swap. Each goroutine may insert its share
// of the keys the table takes before it must grow; one that runs out
// stops there, and the keys of its share from there on are done after
// the others, in their order, through Insert, which grows the table. It
// returns whether slots (when not nil) are all valid.
func (t *Table[V]) updateParallel(keys []uint64, g []V, upd Updater[V], slots []uint32, parts int) bool {
	gen := t.gen
	record := slots != nil && t.Cap() < math.MaxUint32
	_, sum := upd.(Sum[V])
	top := uint(64 - bits.TrailingZeros(uint(parts)))
	budget := (t.growAt - t.used) / parts
	inserted, stop := make([]int, parts), make([]int, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			inserted[p], stop[p] = t.updatePart(keys, g, upd, slots, record, sum, uint64(p), top, budget)
		})
	}
	wg.Wait()
	for _, n := range inserted {
		t.used += n
	}
	d := t.dim
	for i := slices.Min(stop); i < len(keys); i++ {
		k := keys[i]
		if i < stop[hash(k)>>top] {
			continue
		}
		s, _ := t.Insert(k)
		t.applyOne(uint64(s), g[i*d:(i+1)*d], upd, sum)
		record = record && t.Cap() < math.MaxUint32
		if record {
			slots[i] = uint32(s)
		}
	}
	return record && t.gen == gen
}

// updatePart applies the keys of one goroutine of updateParallel, those
// whose hashes' top bits (hash >> top) are part, inserting at most budget
// of them. It returns the number it inserted and the index in keys of
// the first it had no room for, len(keys) when none.
func (t *Table[V]) updatePart(keys []uint64, g []V, upd Updater[V], slots []uint32, record, sum bool, part uint64, top uint, budget int) (inserted, stop int) {
	d, tk := t.dim, t.keys
	var (
		idx   [group]int
		h, sl [group]uint64
	)
	for i := 0; i < len(keys); {
		n := 0
		for ; i < len(keys) && n < group; i++ {
			if hk := hash(keys[i]); hk>>top == part {
				idx[n], h[n] = i, hk>>t.shift
				n++
			}
		}
		var sk uint64
		for _, at := range h[:n] {
			sk += atomic.LoadUint64(&tk[at])
		}
		keep(sk)
		done := n
		for j := range n {
			s, isNew, ok := t.claim(keys[idx[j]], h[j], inserted < budget)
			if !ok {
				done = j
				break
			}
			if isNew {
				inserted++
			}
			sl[j] = s
		}
		t.touchVals(sl[:done])
		for j, s := range sl[:done] {
			k := idx[j]
			if record {
				slots[k] = uint32(s)
			}
			t.applyOne(s, g[k*d:(k+1)*d], upd, sum)
		}
		if done < n {
			return inserted, idx[done]
		}
	}
	return inserted, len(keys)
}

// claim returns the slot of key, whose hash slot is i, for updatePart: the
// slot that holds it or, when room, a free one it takes (isNew); without
// room a key that is absent is not taken (ok false). Key 0 has its own
// slot, which takes no room.
func (t *Table[V]) claim(key, i uint64, room bool) (slot uint64, isNew, ok bool) {
	if key == 0 {
		t.hasZero = true // only the goroutine of part 0 sees key 0
		return uint64(t.Cap()), false, true
	}
	tk := t.keys
	for ; ; i = (i + 1) & t.mask {
		switch atomic.LoadUint64(&tk[i]) {
		case key:
			return i, false, true
		case 0:
			if !room {
				return 0, false, false
			}
			if atomic.CompareAndSwapUint64(&tk[i], 0, key) {
				return i, true, true
			}
			// Another goroutine's key took the slot: probe on.
		}
	}
}

// applyOne applies upd to slot s with gradient gs (Dim() values); sum
// says that upd is the sum updater.
func (t *Table[V]) applyOne(s uint64, gs []V, upd Updater[V], sum bool) {
	if sum && t.dim == 1 {
		t.vals[s] += gs[0]
		return
	}
	upd.Apply(t.Vals(int(s)), t.State(int(s)), gs)
}

// gatherParallel is Gather's loop on parts goroutines, each on a
// contiguous share of keys, for a hash table and no missing function.
func (t *Table[V]) gatherParallel(keys []uint64, out []V, parts int) int {
	d := t.dim
	step := (len(keys)/parts + group - 1) / group * group
	found := make([]int, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := min(p*step, len(keys)), len(keys)
		if p < parts-1 {
			hi = min((p+1)*step, len(keys))
		}
		wg.Go(func() { found[p] = t.gatherSpan(keys[lo:hi], out[lo*d:hi*d], lo, nil) })
	}
	wg.Wait()
	n := 0
	for _, f := range found {
		n += f
	}
	return n
}
