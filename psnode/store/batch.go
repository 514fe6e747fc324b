package store

import (
	"fmt"
	"math"
	"sync/atomic"
)

// group is the number of keys a batch operation hashes and touches before
// it probes any of them. Touching a slot is an independent load, so the
// processor has up to group cache misses in flight at once instead of one
// per key, which is what a lookup in a table much larger than the cache
// costs; sixteen covers the outstanding misses a core can track.
const group = 16

// touched counts nothing of interest: keep makes the sum of the loads
// that bring a group's slots into the cache decide whether it is
// incremented, so that the compiler cannot drop those loads. It is atomic
// so that tables used by different goroutines do not race on it.
var touched atomic.Uint64

func keep[T uint64 | float32 | float64](s T) {
	if s == 1 {
		touched.Add(1)
	}
}

// touchKeys records in h the slot where the probe for each key of ks
// starts and, unless stream, loads those slots all at once, to bring the
// lines into the cache.
func (t *Table[V]) touchKeys(ks []uint64, h *[group]uint64, stream bool) {
	t.homes(ks, h)
	if stream {
		return
	}
	var s uint64
	keys := t.keys
	for j := range ks {
		s += keys[h[j]]
	}
	keep(s)
}

// homes records in h the slot where the probe for each key of ks starts.
func (t *Table[V]) homes(ks []uint64, h *[group]uint64) {
	for j, k := range ks {
		h[j] = t.home(k)
	}
}

// streams reports whether n keys, ascending when asc, are read in the
// order of their slots, close enough together that the processor, which
// sees memory read in order, brings the lines in ahead of the reads by
// itself: a table that places keys by order, and on average at most
// eight slots, one or two cache lines, from one key to the next. Loading
// their slots ahead then only costs time.
func (t *Table[V]) streams(n int, asc bool) bool {
	return t.ordered && asc && n*8 >= t.Cap()
}

// after returns the slot of key when it is the first slot from both its
// home slot h and next, the slot after the previous key's: where a key of
// ascending keys is, in a table that places keys by order, when the
// table holds few keys between it and the previous one, as when a push
// or pull covers much of the table. Whether it is there or one slot
// further, for keys scattered at random, is as good as random, and the
// probe's guess would often be wrong; this guess is mostly right. A miss
// costs one load of a line already read; the caller then probes from h.
func (t *Table[V]) after(key, h, next uint64) (uint64, bool) {
	p := max(h, next) & t.mask
	return p, key != 0 && atomic.LoadUint64(&t.keys[p]) == key
}

// touchVals loads the first value (and state value) of each slot.
func (t *Table[V]) touchVals(slots []uint64) {
	var s V
	vals, dim := t.vals, uint64(t.dim)
	for _, i := range slots {
		s += vals[i*dim]
	}
	if t.stride > 0 {
		state, stride := t.state, uint64(t.stride)
		for _, i := range slots {
			s += state[i*stride]
		}
	}
	keepV(s)
}

// probeFrom is probe starting at slot i, the hash slot of key.
func (t *Table[V]) probeFrom(key, i uint64) (uint64, bool) {
	keys := t.keys
	for ; ; i = (i + 1) & t.mask {
		switch keys[i] {
		case key:
			return i, true
		case 0:
			return i, false
		}
	}
}

// Update inserts the keys that are absent (as Insert does, calling the
// SetInit function on each new key) and applies upd to every key's values
// and state with its gradient: g holds Dim() values per key, in the order
// of keys. The result is that of Insert then upd.Apply for each key in
// turn, also for a key that appears more than once.
//
// When slots is not nil it must have len(keys) elements, and Update stores
// each key's slot there; it reports whether they are all valid at its
// return (false when the table grew after some were stored, or a slot does
// not fit in 32 bits). ValsAt reads values by those slots for as long as
// Generation is unchanged.
//
// Update works on groups of keys, loading their slots together, and
// applies the sum updater without a call per key.
func (t *Table[V]) Update(keys []uint64, g []V, upd Updater[V], slots []uint32) (bool, error) {
	d := t.dim
	if len(g) != len(keys)*d {
		return false, fmt.Errorf("%w: %d values for %d keys of %d values", ErrLength, len(g), len(keys), d)
	}
	if slots != nil && len(slots) != len(keys) {
		return false, fmt.Errorf("%w: room for %d slots for %d keys", ErrLength, len(slots), len(keys))
	}
	if upd.StateWidth() != t.sw {
		return false, fmt.Errorf("%w: %s keeps %d state values per value, the table %d", ErrLength, upd.Name(), upd.StateWidth(), t.sw)
	}
	parts := partsFor(len(keys))
	asc := false
	if t.autoMax > 0 || parts > 1 {
		var span keySpan
		span, asc = scan(keys)
		if t.autoMax > 0 {
			t.span = t.span.with(span)
		}
	}
	if t.dense {
		done, valid := t.updateDense(keys, g, upd, slots)
		if done == len(keys) {
			return valid, nil
		}
		// keys[done] lies outside the range: lay the table out anew.
		rest := keys[done:]
		if err := t.fit(t.used + len(rest)); err != nil {
			return false, err
		}
		_, err := t.Update(rest, g[done*d:], upd, tail(slots, done))
		return false, err
	}
	// A push much larger than the table is mostly new keys: grow once for
	// all of them rather than doubling step by step. (A push of keys that
	// are already stored takes the ordinary growth, which never happens.)
	// With AutoDense the table goes dense instead when it can, in the
	// slots it has or grows to.
	c := t.Cap()
	if n := len(keys); t.used+n > t.growAt && n > t.used {
		var err error
		if c, err = t.capacityFor(t.used + n); err != nil {
			return false, err
		}
	}
	if t.layout(c) {
		return t.Update(keys, g, upd, slots)
	}
	if parts > 1 && asc && t.init == nil && pure(upd) {
		return t.updateParallel(keys, g, upd, slots, parts), nil
	}
	gen := t.gen
	record := slots != nil && t.Cap() < math.MaxUint32
	_, sum := upd.(Sum[V])
	stream := t.streams(len(keys), asc)
	var h, sl [group]uint64
	next := uint64(0) // the slot after the last key's
	for lo := 0; lo < len(keys); lo += group {
		ks := keys[lo:min(lo+group, len(keys))]
		if t.used+len(ks) > t.growAt || t.crowded {
			if err := t.fit(t.used + len(ks)); err != nil {
				return false, err
			}
			if t.dense {
				_, err := t.Update(keys[lo:], g[lo*d:], upd, tail(slots, lo))
				return false, err
			}
			record = record && t.Cap() < math.MaxUint32
			stream = t.streams(len(keys), asc)
		}
		t.touchKeys(ks, &h, stream)
		for j, k := range ks {
			s, ok := uint64(0), false
			if stream {
				s, ok = t.after(k, h[j], next)
			}
			if !ok {
				s = t.insertAt(k, h[j])
			}
			sl[j], next = s, s+1
		}
		ss := sl[:len(ks)]
		if !stream {
			t.touchVals(ss)
		}
		if record {
			for j, s := range ss {
				slots[lo+j] = uint32(s)
			}
		}
		t.applyAt(ss, g[lo*d:], upd, sum)
	}
	return record && t.gen == gen, nil
}

// tail returns slots[i:], or nil when slots is nil.
func tail(slots []uint32, i int) []uint32 {
	if slots == nil {
		return nil
	}
	return slots[i:]
}

// applyAt applies upd to the values and state of slots ss with the
// gradients gs, Dim() values per slot in the order of ss; sum says that
// upd is the sum updater, applied without a call per key.
func (t *Table[V]) applyAt(ss []uint64, gs []V, upd Updater[V], sum bool) {
	d := t.dim
	switch {
	case sum && d == 1:
		vals := t.vals
		for j, s := range ss {
			vals[s] += gs[j]
		}
	case sum:
		for j, s := range ss {
			w := t.vals[int(s)*d : int(s+1)*d]
			for i, v := range gs[j*d : (j+1)*d] {
				w[i] += v
			}
		}
	default:
		for j, s := range ss {
			upd.Apply(t.Vals(int(s)), t.State(int(s)), gs[j*d:(j+1)*d])
		}
	}
}

// updateDense is Update on a dense table, up to the first key outside its
// range; it returns the number of keys applied and whether their slots
// were recorded.
func (t *Table[V]) updateDense(keys []uint64, g []V, upd Updater[V], slots []uint32) (int, bool) {
	d, n, base, tk := t.dim, uint64(t.Cap()), t.base, t.keys
	record := slots != nil && n < math.MaxUint32
	_, sum := upd.(Sum[V])
	var sl [group]uint64
	for lo := 0; lo < len(keys); lo += group {
		ks := keys[lo:min(lo+group, len(keys))]
		for j, k := range ks {
			switch i := k - base; {
			case k == 0:
				sl[j] = t.insertAt(0, 0)
			case i < n:
				sl[j] = i
				if tk[i] != k {
					tk[i] = k
					t.used++
					t.initSlot(int(i), k)
				}
			default:
				t.applyAt(sl[:j], g[lo*d:], upd, sum)
				return lo + j, false
			}
		}
		ss := sl[:len(ks)]
		if record {
			for j, s := range ss {
				slots[lo+j] = uint32(s)
			}
		}
		t.applyAt(ss, g[lo*d:], upd, sum)
	}
	return len(keys), record
}

// UpdateAt applies upd to the values and state of slots with the
// gradients g, Dim() values per slot in the order of slots: Update of the
// keys whose slots Update or GatherSlots stored, with the table's
// Generation unchanged since, without looking them up again. It inserts
// nothing. A slot outside the table is an error, and then nothing is
// applied.
func (t *Table[V]) UpdateAt(slots []uint32, g []V, upd Updater[V]) error {
	d := t.dim
	if len(g) != len(slots)*d {
		return fmt.Errorf("%w: %d values for %d slots of %d values", ErrLength, len(g), len(slots), d)
	}
	if upd.StateWidth() != t.sw {
		return fmt.Errorf("%w: %s keeps %d state values per value, the table %d", ErrLength, upd.Name(), upd.StateWidth(), t.sw)
	}
	limit := uint64(t.Cap()) // the zero key's slot, when it is stored
	for _, s := range slots {
		if s := uint64(s); s > limit || s == limit && !t.hasZero {
			return fmt.Errorf("%w: slot %d of a table of %d", ErrSlot, s, limit)
		}
	}
	_, sum := upd.(Sum[V])
	var ss [group]uint64
	for lo := 0; lo < len(slots); lo += group {
		n := min(group, len(slots)-lo)
		for j, s := range slots[lo : lo+n] {
			ss[j] = uint64(s)
		}
		t.applyAt(ss[:n], g[lo*d:], upd, sum)
	}
	return nil
}

// ValsAt copies the values of slots (as Update stored them, with the
// table's Generation unchanged since) into out, Dim() values per slot.
func (t *Table[V]) ValsAt(slots []uint32, out []V) error {
	d := t.dim
	if len(out) != len(slots)*d {
		return fmt.Errorf("%w: room for %d values for %d slots of %d values", ErrLength, len(out), len(slots), d)
	}
	vals := t.vals
	if d == 1 {
		for i, s := range slots {
			out[i] = vals[s]
		}
		return nil
	}
	for i, s := range slots {
		copy(out[i*d:(i+1)*d], vals[int(s)*d:int(s+1)*d])
	}
	return nil
}

// insertAt is Insert for a key whose hash slot is i, in a table with room
// for it.
func (t *Table[V]) insertAt(key, i uint64) uint64 {
	if key == 0 {
		slot := t.Cap()
		if !t.hasZero {
			t.hasZero = true
			t.initSlot(slot, 0)
		}
		return uint64(slot)
	}
	h := i
	i, found := t.probeFrom(key, h)
	if !found {
		t.keys[i] = key
		t.used++
		t.noteMove((i - h) & t.mask)
		t.initSlot(int(i), key)
	}
	return i
}

// Gather copies the values of keys into out (Dim() values per key, in the
// order of keys). The values of an absent key are zero, and missing, when
// not nil, is called with its index in keys after they are written, so
// that it can fill out's values for it. It returns the number of keys found.
//
// Gather works on groups of keys as Update does.
func (t *Table[V]) Gather(keys []uint64, out []V, missing func(i int)) (int, error) {
	return t.gather(keys, out, missing, nil)
}

// GatherSlots is Gather that also stores each key's slot in slots, which
// must have len(keys) elements (an absent key's element is left as it
// was). It reports whether every key was found with a slot that fits in
// 32 bits: then UpdateAt and ValsAt take those slots for as long as
// Generation is unchanged.
func (t *Table[V]) GatherSlots(keys []uint64, out []V, missing func(i int), slots []uint32) (int, bool, error) {
	if len(slots) != len(keys) {
		return 0, false, fmt.Errorf("%w: room for %d slots for %d keys", ErrLength, len(slots), len(keys))
	}
	if t.Cap() >= math.MaxUint32 {
		slots = nil
	}
	found, err := t.gather(keys, out, missing, slots)
	return found, err == nil && slots != nil && found == len(keys), err
}

// gather is Gather, storing the found keys' slots in rec when it is not
// nil.
func (t *Table[V]) gather(keys []uint64, out []V, missing func(i int), rec []uint32) (int, error) {
	d := t.dim
	if len(out) != len(keys)*d {
		return 0, fmt.Errorf("%w: room for %d values for %d keys of %d values", ErrLength, len(out), len(keys), d)
	}
	if t.dense {
		return t.gatherDense(keys, out, missing, rec), nil
	}
	stream := false
	if t.streams(len(keys), true) {
		_, stream = scan(keys)
	}
	if parts := partsFor(len(keys)); parts > 1 && missing == nil {
		return t.gatherParallel(keys, out, parts, stream, rec), nil
	}
	return t.gatherSpan(keys, out, 0, missing, stream, rec), nil
}

// gatherSpan is Gather on a hash table for keys, which lie at base in the
// keys of the call: missing is given indices from base. stream says that
// the keys are read in the order of their slots (see streams). The found
// keys' slots go to rec, in the order of keys, when it is not nil.
func (t *Table[V]) gatherSpan(keys []uint64, out []V, base int, missing func(i int), stream bool, rec []uint32) int {
	d := t.dim
	var h [group]uint64
	var slots [group]int64
	found := 0
	vals := t.vals
	next := uint64(0) // the slot after the last key found
	for lo := 0; lo < len(keys); lo += group {
		ks := keys[lo:min(lo+group, len(keys))]
		t.touchKeys(ks, &h, stream)
		var s V
		for j, k := range ks {
			slots[j] = -1
			switch {
			case k == 0:
				if t.hasZero {
					slots[j] = int64(t.Cap())
				}
			case stream:
				i, ok := t.after(k, h[j], next)
				if !ok {
					i, ok = t.probeFrom(k, h[j])
				}
				if ok {
					slots[j], next = int64(i), i+1
				}
			default:
				if i, ok := t.probeFrom(k, h[j]); ok {
					slots[j] = int64(i)
					s += vals[i*uint64(d)] // the value's line, loaded while the other keys are probed
				}
			}
		}
		keepV(s)
		found += t.readSlots(slots[:len(ks)], out[lo*d:], base+lo, missing, tail(rec, lo))
	}
	return found
}

// readSlots copies the values of slots into out, Dim() values per slot;
// a slot of -1 is an absent key, whose values are zero and whose index
// (lo plus its position) is given to missing when missing is not nil. It
// stores the other slots in rec, at their positions, when rec is not nil,
// and returns the number of keys found.
func (t *Table[V]) readSlots(slots []int64, out []V, lo int, missing func(i int), rec []uint32) int {
	d, vals, found := t.dim, t.vals, 0
	for j, sl := range slots {
		o := out[j*d : (j+1)*d]
		if sl < 0 {
			clear(o)
			if missing != nil {
				missing(lo + j)
			}
			continue
		}
		found++
		if rec != nil {
			rec[j] = uint32(sl)
		}
		if d == 1 {
			o[0] = vals[sl]
		} else {
			copy(o, vals[int(sl)*d:int(sl+1)*d])
		}
	}
	return found
}

// gatherDense is Gather on a dense table, storing slots in rec as
// gatherSpan does.
func (t *Table[V]) gatherDense(keys []uint64, out []V, missing func(i int), rec []uint32) int {
	n, base, tk := uint64(t.Cap()), t.base, t.keys
	var slots [group]int64
	found := 0
	for lo := 0; lo < len(keys); lo += group {
		ks := keys[lo:min(lo+group, len(keys))]
		for j, k := range ks {
			slots[j] = -1
			switch i := k - base; {
			case k == 0:
				if t.hasZero {
					slots[j] = int64(n)
				}
			case i < n && tk[i] == k:
				slots[j] = int64(i)
			}
		}
		found += t.readSlots(slots[:len(ks)], out[lo*t.dim:], lo, missing, tail(rec, lo))
	}
	return found
}

func keepV[V Number](s V) { keep(float64(s)) }
