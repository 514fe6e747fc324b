package store

import (
	"math"
	"runtime"
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
// as many as the processors this process may use (GOMAXPROCS, and the
// CPUs it is bound to), at most maxParts; 1 below parallelMin.
func partsFor(n int) int {
	if n < parallelMin {
		return 1
	}
	if testParts > 0 {
		return testParts
	}
	return min(runtime.GOMAXPROCS(0), runtime.NumCPU(), maxParts)
}

// testParts, when a test sets it, is partsFor's answer from parallelMin
// keys on, whatever the processors.
var testParts int

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

// scan returns the span of keys, as spanOf does, and whether they are in
// strictly ascending order, each key once, as the keys of a request are;
// then the span is read off their ends, and keys are read once.
func scan(keys []uint64) (keySpan, bool) {
	for i := 1; i < len(keys); i++ {
		if keys[i] <= keys[i-1] {
			return spanOf(keys), false
		}
	}
	if len(keys) > 0 && keys[0] == 0 {
		// Only the first of ascending keys can be 0.
		keys = keys[1:]
	}
	if len(keys) == 0 {
		return keySpan{}, true
	}
	return keySpan{keys[0], keys[len(keys)-1], true}, true
}

// run is the share of a call's keys one goroutine takes: keys[lo:hi].
type run struct{ lo, hi int }

// runsOf cuts n keys into parts runs, each of whole groups but the last.
func runsOf(n, parts int) []run {
	step := (n/parts + group - 1) / group * group
	runs := make([]run, parts)
	for p := range runs {
		runs[p] = run{min(p*step, n), min((p+1)*step, n)}
	}
	runs[parts-1].hi = n
	return runs
}

// updateParallel is Update's loop on parts goroutines, for a hash table
// without an init function, a pure updater and keys in strictly
// ascending order: goroutine p takes the p-th run of keys. No key is in
// two runs, so no two goroutines write one slot's values, and each key
// ends with the values and state of the serial loop, bit for bit (its
// slot may differ, as the order of insertion does). A probe may run into
// another goroutine's keys, so the key slots are read atomically and a
// free one is taken with a compare-and-swap. Each goroutine may insert
// its share of the keys the table takes before it must grow, and, in a
// table that places keys by order, move them its share of maxMoved from
// the slots where their probes start; one that runs out stops there, and
// the rest of its run is done after the others, through Insert, which
// grows the table or hashes it again. It returns whether slots (when not
// nil) are all valid.
func (t *Table[V]) updateParallel(keys []uint64, g []V, upd Updater[V], slots []uint32, parts int) bool {
	gen := t.gen
	record := slots != nil && t.Cap() < math.MaxUint32
	_, sum := upd.(Sum[V])
	b := budget{
		room:   (t.growAt - t.used) / parts,
		moves:  max(0, maxMoved(t.used)-t.moved) / parts,
		stream: t.streams(len(keys), true),
	}
	runs := runsOf(len(keys), parts)
	done := make([]runDone, parts)
	var wg sync.WaitGroup
	for p, r := range runs {
		wg.Go(func() {
			done[p] = t.updateRun(keys, g, upd, slots, r, record, sum, b)
		})
	}
	wg.Wait()
	for _, rd := range done {
		t.used += rd.inserted
		t.noteMove(uint64(rd.moved))
	}
	d := t.dim
	for p, r := range runs {
		for i := done[p].stop; i < r.hi; i++ {
			s, _ := t.Insert(keys[i])
			one := [1]uint64{uint64(s)}
			t.applyAt(one[:], g[i*d:(i+1)*d], upd, sum)
			record = record && t.Cap() < math.MaxUint32
			if record {
				slots[i] = uint32(s)
			}
		}
	}
	return record && t.gen == gen
}

// budget is what one goroutine of updateParallel may take of a table:
// room keys to insert, and moves, beyond movesPerKey for each key it
// inserts, for their distances from the slots where their probes start,
// when the table places keys by order (see maxMoved). stream says that
// the keys are read in the order of their slots (see Table.streams).
type budget struct {
	room, moves int
	stream      bool
}

// runDone is what updateRun did: the keys it inserted, their distances
// from the slots where their probes start, summed, and the index in keys
// of the first key it had no room for, the end of its run when none.
type runDone struct{ inserted, moved, stop int }

// updateRun applies the keys of run r, as Update's loop does, within b.
func (t *Table[V]) updateRun(keys []uint64, g []V, upd Updater[V], slots []uint32, r run, record, sum bool, b budget) runDone {
	d, tk := t.dim, t.keys
	var rd runDone
	var h, sl [group]uint64
	next := uint64(0) // the slot after the last key's
	for lo := r.lo; lo < r.hi; lo += group {
		ks := keys[lo:min(lo+group, r.hi)]
		t.homes(ks, &h)
		if !b.stream {
			var sk uint64
			for j := range ks {
				sk += atomic.LoadUint64(&tk[h[j]])
			}
			keep(sk)
		}
		done := len(ks)
		for j, k := range ks {
			if b.stream {
				if s, ok := t.after(k, h[j], next); ok {
					sl[j], next = s, s+1
					continue
				}
			}
			s, isNew, ok := t.claim(k, h[j], rd.inserted < b.room)
			next = s + 1
			if !ok {
				done = j
				break
			}
			if isNew {
				rd.inserted++
				rd.moved += int((s - h[j]) & t.mask)
			}
			sl[j] = s
		}
		ss := sl[:done]
		if !b.stream {
			t.touchVals(ss)
		}
		if record {
			for j, s := range ss {
				slots[lo+j] = uint32(s)
			}
		}
		t.applyAt(ss, g[lo*d:], upd, sum)
		if done < len(ks) || t.ordered && rd.moved > movesPerKey*rd.inserted+b.moves {
			rd.stop = lo + done
			return rd
		}
	}
	rd.stop = r.hi
	return rd
}

// claim returns the slot of key, whose hash slot is i, for updateRun: the
// slot that holds it or, when room, a free one it takes (isNew); without
// room a key that is absent is not taken (ok false). Key 0 has its own
// slot, which takes no room.
func (t *Table[V]) claim(key, i uint64, room bool) (slot uint64, isNew, ok bool) {
	if key == 0 {
		t.hasZero = true // only the first run can hold key 0
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

// gatherParallel is Gather's loop on parts goroutines, each on a run of
// keys, for a hash table and no missing function.
func (t *Table[V]) gatherParallel(keys []uint64, out []V, parts int, stream bool, rec []uint32) int {
	d := t.dim
	found := make([]int, parts)
	var wg sync.WaitGroup
	for p, r := range runsOf(len(keys), parts) {
		wg.Go(func() {
			found[p] = t.gatherSpan(keys[r.lo:r.hi], out[r.lo*d:r.hi*d], r.lo, nil, stream, tail(rec, r.lo))
		})
	}
	wg.Wait()
	n := 0
	for _, f := range found {
		n += f
	}
	return n
}
