package store

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

// Number is the type of parameter values and optimizer state.
type Number interface{ ~float32 | ~float64 }

// ErrInvalidConfig is wrapped by the errors of the constructors and of the
// updaters' Validate methods for out-of-range arguments.
var ErrInvalidConfig = errors.New("store: invalid configuration")

const (
	// minCapacity is the smallest number of hash slots of a Table.
	minCapacity = 16
	// MaxDim is the largest number of values per key of a Table. With
	// MaxStateWidth it bounds what an empty table allocates (about 140 MB).
	MaxDim = 1 << 16
	// MaxStateWidth is the largest number of state values per value.
	MaxStateWidth = 16
	// A Table doubles when an insertion would take its load (keys other
	// than key 0, over hash slots) above loadNum/loadDen.
	loadNum, loadDen = 3, 4
)

// Table maps uint64 keys to fixed-width value vectors and optional optimizer
// state. Every key, including 0 and math.MaxUint64, may be stored. Keys
// cannot be deleted.
//
// Keys, values and state are kept in parallel slices indexed by slot:
// hash slots 0..Cap()-1, probed linearly from a hash of the key (or, see
// AutoDense, from a slot set by its order), plus one extra slot, Cap(),
// for key 0, which marks free hash slots.
//
// Table is not safe for concurrent use.
type Table[V Number] struct {
	dim    int // values per key
	sw     int // state values per value
	stride int // state values per key: dim*sw

	keys  []uint64 // len cap+1; keys[i] == 0 means hash slot i is free
	vals  []V      // len (cap+1)*dim
	state []V      // len (cap+1)*stride; nil when sw == 0

	shift   uint   // 64 - log2(cap): the slot of key k starts at hash(k) >> shift
	mask    uint64 // cap-1
	used    int    // occupied hash slots (keys other than 0)
	growAt  int    // used may not exceed growAt
	maxCap  int    // largest capacity whose slices stay addressable
	hasZero bool   // key 0 is stored in slot cap
	gen     uint64 // incremented whenever keys move to other slots

	// dense says that the table addresses its keys directly: key k other
	// than 0 is in slot k-base, for k-base < cap (see UseDenseRange).
	// shift, mask and growAt are unused then.
	dense bool
	base  uint64

	// autoMax, when not 0, lets the table choose between hashing and
	// addressing its keys directly, in at most autoMax slots (AutoDense);
	// span then covers every key it holds other than 0.
	autoMax int
	span    keySpan

	// ordered says that a hash table places keys by their order rather
	// than by a hash: the slot of key k starts at (k-lo)*mult/2^64 (see
	// home), which spreads keys scattered evenly over [lo, lo+2^64/mult*c)
	// as a hash does and keeps ascending keys in ascending slots. moved
	// is the sum of the distances of the keys from those slots, and
	// crowded says it passed maxMoved: keys crowd one part of the table,
	// which must be hashed again. Only AutoDense tables place keys so.
	ordered  bool
	lo, mult uint64
	moved    int
	crowded  bool

	init func(key uint64, vals, state []V)
}

// keySpan is the smallest and the largest of some keys other than 0; ok
// is false when there are none.
type keySpan struct {
	lo, hi uint64
	ok     bool
}

// spanOf returns the span of keys, skipping 0.
func spanOf(keys []uint64) keySpan {
	var s keySpan
	for _, k := range keys {
		if k == 0 {
			continue
		}
		if !s.ok {
			s = keySpan{k, k, true}
			continue
		}
		s.lo, s.hi = min(s.lo, k), max(s.hi, k)
	}
	return s
}

// with returns the span of the keys of s and of o.
func (s keySpan) with(o keySpan) keySpan {
	switch {
	case !o.ok:
		return s
	case !s.ok:
		return o
	}
	return keySpan{min(s.lo, o.lo), max(s.hi, o.hi), true}
}

// NewTable returns an empty table of dim values per key and stateWidth
// state values per value, sized so that capacityHint keys fit without
// growing. dim must be in [1, MaxDim], stateWidth in [0, MaxStateWidth]
// and capacityHint at least 0. The slices are allocated at once, so the hint
// must fit in memory: about 16 to 32 bytes per key at dim 1 for float32.
func NewTable[V Number](dim, stateWidth, capacityHint int) (*Table[V], error) {
	if dim < 1 || dim > MaxDim {
		return nil, fmt.Errorf("%w: dim = %d, want 1..%d", ErrInvalidConfig, dim, MaxDim)
	}
	if stateWidth < 0 || stateWidth > MaxStateWidth {
		return nil, fmt.Errorf("%w: state width = %d, want 0..%d", ErrInvalidConfig, stateWidth, MaxStateWidth)
	}
	if capacityHint < 0 {
		return nil, fmt.Errorf("%w: capacity hint = %d, want >= 0", ErrInvalidConfig, capacityHint)
	}
	t := &Table[V]{dim: dim, sw: stateWidth, stride: dim * stateWidth}
	// The widest slice, of (cap+1)*dim*max(1, stateWidth) values of at most
	// 8 bytes, must stay addressable.
	perSlot := dim * max(1, stateWidth)
	t.maxCap = 1 << (bits.Len(uint(math.MaxInt/8/perSlot)) - 2)
	c, err := t.capacityFor(capacityHint)
	if err != nil {
		return nil, err
	}
	t.alloc(c)
	return t, nil
}

// capacityFor returns the number of hash slots needed to hold n keys other
// than 0 below the maximum load: a power of two, at least minCapacity.
func (t *Table[V]) capacityFor(n int) (int, error) {
	if n > t.maxCap/loadDen*loadNum {
		return 0, fmt.Errorf("%w: %d keys exceed the table limit of %d", ErrInvalidConfig, n, t.maxCap/loadDen*loadNum)
	}
	need := (n*loadDen + loadNum - 1) / loadNum // ceil(n / load)
	c := minCapacity
	if need > c {
		c = 1 << bits.Len(uint(need-1))
	}
	return c, nil
}

// alloc replaces the table's slices with empty ones of c hash slots.
func (t *Table[V]) alloc(c int) {
	t.keys = make([]uint64, c+1)
	t.vals = make([]V, (c+1)*t.dim)
	t.state = nil
	if t.stride > 0 {
		t.state = make([]V, (c+1)*t.stride)
	}
	adviseHuge(t.keys)
	adviseHuge(t.vals)
	adviseHuge(t.state)
	t.shift = uint(64 - bits.TrailingZeros(uint(c)))
	t.mask = uint64(c - 1)
	t.growAt = c / loadDen * loadNum
	t.moved, t.crowded = 0, false
}

// SetInit sets a function that Insert calls on each new key's values and
// state, which are zero before the call; nil (the default) leaves them zero.
// fn must not call methods of t.
func (t *Table[V]) SetInit(fn func(key uint64, vals, state []V)) { t.init = fn }

// Dim returns the number of values per key.
func (t *Table[V]) Dim() int { return t.dim }

// StateWidth returns the number of state values per value.
func (t *Table[V]) StateWidth() int { return t.sw }

// Len returns the number of keys.
func (t *Table[V]) Len() int {
	if t.hasZero {
		return t.used + 1
	}
	return t.used
}

// Cap returns the number of hash slots; valid slots are 0..Cap().
func (t *Table[V]) Cap() int { return len(t.keys) - 1 }

// hash is the murmur3 fmix64 finalizer. The table uses the top bits of a
// mixer distinct from the partitioner's, whose output modulo the number of
// servers selects the server: all keys a server holds share that residue,
// and reusing that mixer would leave slots unused.
func hash(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// home returns the slot where the probe for key k (not 0) starts in a
// hash table.
func (t *Table[V]) home(k uint64) uint64 {
	if t.ordered {
		h, _ := bits.Mul64(k-t.lo, t.mult)
		return h & t.mask
	}
	return hash(k) >> t.shift
}

// maxMoved bounds the distances of n keys from the slots where their
// probes start, summed, in a table that places keys by their order:
// movesPerKey (four) per key on average, where a good hash at the
// highest load averages 1.5. The layout that places them so is chosen
// only when they sum to at most half of it, so that the new keys that
// crowd the table again are at least as many as the keys it holds.
func maxMoved(n int) int { return movesPerKey * (n + minCapacity) }

// movesPerKey is the average distance maxMoved allows a key.
const movesPerKey = 4

// noteMove records that a key was inserted dist slots past the slot
// where its probe started.
func (t *Table[V]) noteMove(dist uint64) {
	if t.ordered {
		t.moved += int(dist)
		t.crowded = t.moved > maxMoved(t.used)
	}
}

// Lookup returns the slot of key and true, or -1 and false if key is absent.
func (t *Table[V]) Lookup(key uint64) (slot int, ok bool) {
	if key == 0 {
		if t.hasZero {
			return t.Cap(), true
		}
		return -1, false
	}
	if t.dense {
		if i := key - t.base; i < uint64(t.Cap()) && t.keys[i] == key {
			return int(i), true
		}
		return -1, false
	}
	if i, ok := t.probe(key); ok {
		return int(i), true
	}
	return -1, false
}

// Insert returns the slot of key, adding the key if it is absent; inserted
// reports whether it was added. A new key's values and state are zero, or
// set by the function given to SetInit.
//
// When the table is full, Insert doubles it first, which moves every key to
// a new slot: slots and Vals/State slices obtained before such an Insert
// must not be used after it. So does an Insert into a table that places
// keys by their order (AutoDense) when keys crowd one part of it: the
// table hashes them again. Reserve prevents both for a known number of
// insertions. A dense table (UseDenseRange) never grows, but inserting a
// key outside its range turns it into a hash table, or, with AutoDense, a
// dense table of a wider range, which moves every key in the same way.
func (t *Table[V]) Insert(key uint64) (slot int, inserted bool) {
	if key == 0 {
		slot = t.Cap()
		if t.hasZero {
			return slot, false
		}
		t.hasZero = true
		t.initSlot(slot, key)
		return slot, true
	}
	if t.autoMax > 0 {
		t.span = t.span.with(keySpan{key, key, true})
	}
	if t.dense {
		if i := key - t.base; i < uint64(t.Cap()) {
			if t.keys[i] == key {
				return int(i), false
			}
			t.keys[i] = key
			t.used++
			t.initSlot(int(i), key)
			return int(i), true
		}
		t.mustFit(t.used + 1)
		return t.Insert(key)
	}
	h := t.home(key)
	i, found := t.probeFrom(key, h)
	if found {
		return int(i), false
	}
	if t.used >= t.growAt || t.crowded {
		t.mustFit(t.used + 1)
		return t.Insert(key)
	}
	t.keys[i] = key
	t.used++
	t.noteMove((i - h) & t.mask)
	t.initSlot(int(i), key)
	return int(i), true
}

// probe returns the slot holding key (found) or the free slot where it
// would be inserted. key must not be 0.
func (t *Table[V]) probe(key uint64) (i uint64, found bool) {
	return t.probeFrom(key, t.home(key))
}

func (t *Table[V]) initSlot(slot int, key uint64) {
	if t.init != nil {
		t.init(key, t.Vals(slot), t.State(slot))
	}
}

// Reserve grows the table, if needed, so that n more keys can be inserted
// without growing it again: the slots returned by those insertions stay
// valid until then. It grows a hash table as a hash table, even with
// AutoDense, and one that places keys by their order is hashed again, as
// such a table must be when keys crowd one part of it. On a dense table
// it does nothing: insertions of keys in its range never move slots.
func (t *Table[V]) Reserve(n int) error {
	if n < 0 {
		return fmt.Errorf("%w: reserve %d keys", ErrInvalidConfig, n)
	}
	if t.dense {
		// Every key of the range has its slot already; keys outside it
		// are not covered (see Insert).
		return nil
	}
	if n <= t.growAt-t.used && !t.ordered {
		return nil
	}
	if n > t.maxCap {
		return fmt.Errorf("%w: reserve %d keys exceeds the table limit", ErrInvalidConfig, n)
	}
	c, err := t.capacityFor(t.used + n)
	if err != nil {
		return err
	}
	t.place(max(c, t.Cap()), false, 0, false)
	return nil
}

// AutoDense lets the table choose its layout whenever it must grow, or
// take a key outside its dense range. It addresses its keys directly, as
// UseDenseRange does, over a range that covers them (other than 0) when
// that range fills no more of the slots a hash table would take for the
// same keys than a hash table may fill (three quarters), and when those
// slots are at most maxSlots: no more memory than hashing, and no hash
// or probe per key. Keys that crowd a range — feature ids 1..n, a
// server's share of a range-partitioned key space whose bound it was not
// told — get that dense layout.
//
// Otherwise it hashes them, and places each key by its order: the probe
// for key k starts (k-lo)/(hi-lo+1) of the way through the slots, for the
// smallest and largest keys lo and hi it holds as it lays them out. Keys
// spread evenly over their range — hashed feature ids, a server's share
// of them under the hash partitioner, sparse ids — fill the slots as
// evenly as a hash would, and ascending keys, as a request's are, fall in
// ascending slots: a large push or pull reads the table in order, which
// the processor fetches ahead by itself, instead of at random. Keys that
// crowd one part of that order, such as a cluster far from the others,
// are hashed with a mixer instead as soon as their distances from the
// slots where their probes start average more than about four (a mixer
// averages 1.5 at the highest load); the table tries their order again
// when it next grows.
//
// An Update of a hash table also goes dense, without growing, when its
// keys and the table's fit so in the slots the table has. maxSlots 0
// turns the choice off; it must be at most MaxDenseKeys.
func (t *Table[V]) AutoDense(maxSlots int) error {
	if maxSlots < 0 || maxSlots > MaxDenseKeys {
		return fmt.Errorf("%w: auto dense limit of %d slots, want 0..%d", ErrInvalidConfig, maxSlots, MaxDenseKeys)
	}
	t.autoMax = min(maxSlots, t.maxCap)
	t.span = spanOf(t.keys[:t.Cap()])
	return nil
}

// denseFor returns the dense layout that covers the table's keys, when
// AutoDense allows one in at most c slots: its slots and its base. Like a
// hash table's keys, the range from the smallest key to the largest fills
// at most loadNum/loadDen of the slots, so that a range that widens a
// little at a time is laid out anew only after it has widened by a share
// of itself; the room is split between both ends.
func (t *Table[V]) denseFor(c int) (n int, base uint64, ok bool) {
	s := t.span
	if !s.ok || s.hi-s.lo >= uint64(min(c, t.autoMax)) {
		return 0, 0, false
	}
	n, err := t.capacityFor(int(s.hi - s.lo + 1))
	if err != nil || n > c || n > t.autoMax {
		return 0, 0, false
	}
	room := uint64(n) - (s.hi - s.lo + 1)
	base = s.lo - min(s.lo, room/2)
	// The range [base, base+n) must not pass the largest key.
	return n, min(base, math.MaxUint64-uint64(n-1)), true
}

// fit lays the table out for need keys other than 0, the span of its
// keys (with those about to be inserted) already recorded: dense when
// AutoDense allows it, otherwise hashed with room for need keys, growing
// only when the hash table has less room.
func (t *Table[V]) fit(need int) error {
	c, err := t.capacityFor(need)
	if err != nil {
		return err
	}
	t.layout(c)
	return nil
}

// layout lays the table out in at most c slots: dense when AutoDense
// allows it (denseFor), otherwise hashed, in c slots when it has fewer
// or is dense, and hashed again in the slots it has when its keys crowd
// the order it placed them by. It reports whether the table is dense
// after.
func (t *Table[V]) layout(c int) bool {
	if n, base, ok := t.denseFor(c); ok {
		t.relayout(n, true, base)
		return true
	}
	switch {
	case t.dense || c > t.Cap():
		t.relayout(c, false, 0)
	case t.crowded:
		t.relayout(t.Cap(), false, 0)
	}
	return false
}

// mustFit is fit for Insert, which has no error to return: the need
// exceeds the table's limit only once memory has long run out.
func (t *Table[V]) mustFit(need int) {
	if err := t.fit(need); err != nil {
		panic("store: " + err.Error())
	}
}

// relayout moves every key to new slices of c slots: key k at k-base when
// dense; otherwise hashed, and with AutoDense placed by order when the
// keys do not crowd that order (see place).
func (t *Table[V]) relayout(c int, dense bool, base uint64) {
	t.place(c, dense, base, !dense && t.autoMax > 0)
}

// place is relayout. A hash table places its keys by their order when
// byOrder is true and it knows their span, unless their distances from
// the slots where their probes start sum to more than half of maxMoved:
// then it hashes them with the mixer after all.
func (t *Table[V]) place(c int, dense bool, base uint64, byOrder bool) {
	if c > t.maxCap {
		// Unreachable in practice: memory runs out long before.
		panic("store: table capacity exceeds its addressable maximum")
	}
	oldCap := t.Cap()
	oldKeys, oldVals, oldState := t.keys, t.vals, t.state
	t.alloc(c)
	t.dense, t.base = dense, base
	t.ordered = false
	if s := t.span; byOrder && s.ok {
		// (k-lo)*mult/2^64 maps the span onto the c slots; a span of
		// at most c keys goes onto as many, key lo+i at i-1 (i > 0).
		t.ordered, t.lo, t.mult = true, s.lo, math.MaxUint64
		if w := s.hi - s.lo + 1; w > uint64(c) {
			t.mult, _ = bits.Div64(uint64(c), 0, w)
		}
	}
	t.gen++
	if !t.moveIn(oldKeys[:oldCap], oldVals, oldState) {
		clear(t.keys)
		clear(t.vals)
		clear(t.state)
		t.ordered, t.moved = false, 0
		t.moveIn(oldKeys[:oldCap], oldVals, oldState)
	}
	if t.hasZero {
		copy(t.Vals(c), oldVals[oldCap*t.dim:])
		copy(t.State(c), oldState[oldCap*t.stride:])
	}
}

// moveIn copies the keys, values and state of another layout's hash
// slots into the table's. It stops and returns false when the table
// places keys by order and they crowd it.
func (t *Table[V]) moveIn(oldKeys []uint64, oldVals, oldState []V) bool {
	dim, stride, c := t.dim, t.stride, uint64(t.Cap())
	limit := maxMoved(t.used) / 2
	for i, k := range oldKeys {
		if k == 0 {
			continue
		}
		j := k - t.base
		if !t.dense {
			h := t.home(k)
			j, _ = t.probeFrom(k, h)
			if t.ordered {
				if t.moved += int((j - h) & t.mask); t.moved > limit {
					return false
				}
			}
		} else if j >= c {
			// The span covers every key; a key outside it is a bug here.
			panic("store: key outside the dense range it was moved to")
		}
		t.keys[j] = k
		if dim == 1 {
			t.vals[j] = oldVals[i]
		} else {
			copy(t.vals[int(j)*dim:int(j+1)*dim], oldVals[i*dim:(i+1)*dim])
		}
		if stride > 0 {
			copy(t.state[int(j)*stride:int(j+1)*stride], oldState[i*stride:(i+1)*stride])
		}
	}
	return true
}

// MaxDenseKeys is the largest key range UseDenseRange accepts.
const MaxDenseKeys = 1 << 30

// UseDenseRange makes an empty table address the keys of [base, base+n)
// directly, key k in slot k-base, instead of hashing them: no hash, no
// probe, and neighbouring keys in neighbouring slots, which is what a
// server of a range-partitioned key space with a bounded dimension wants.
// The slices for n keys are allocated at once (Linux backs untouched
// pages with nothing). Key 0 keeps its own slot, Cap(), as in a hash
// table. Inserting a key outside the range turns the table into a hash
// table of the keys it holds, or with AutoDense a dense table of a wider
// range (Generation changes, as when a hash table grows). n must be in
// [1, MaxDenseKeys] and base+n must not overflow.
func (t *Table[V]) UseDenseRange(base uint64, n int) error {
	if t.Len() != 0 {
		return fmt.Errorf("%w: dense range on a table of %d keys, want an empty one", ErrInvalidConfig, t.Len())
	}
	if n < 1 || n > MaxDenseKeys || n > t.maxCap {
		return fmt.Errorf("%w: dense range of %d keys, want 1..%d", ErrInvalidConfig, n, min(MaxDenseKeys, t.maxCap))
	}
	if base > math.MaxUint64-uint64(n)+1 {
		return fmt.Errorf("%w: dense range [%d, %d+%d) overflows", ErrInvalidConfig, base, base, n)
	}
	t.relayout(n, true, base)
	return nil
}

// Dense reports whether the table addresses its keys directly (see
// UseDenseRange).
func (t *Table[V]) Dense() bool { return t.dense }

// Layout names the way the table finds a key's slot: "dense" when it
// addresses keys directly, "ordered" when it is a hash table that places
// keys by their order (see AutoDense), "hashed" otherwise.
func (t *Table[V]) Layout() string {
	switch {
	case t.dense:
		return "dense"
	case t.ordered:
		return "ordered"
	}
	return "hashed"
}

// Generation changes whenever the table grows or changes its layout,
// that is, whenever slots obtained before stop being valid.
func (t *Table[V]) Generation() uint64 { return t.gen }

// Key returns the key stored in slot. It panics if slot is not a slot
// returned by Lookup or Insert since the table last grew.
func (t *Table[V]) Key(slot int) uint64 {
	if slot == t.Cap() {
		return 0
	}
	return t.keys[slot]
}

// Vals returns the dim values of slot. The slice aliases the table: writes
// to it update the parameter, and it is stale after an Insert that grows
// the table. Its capacity is dim, so appending to it never overwrites a
// neighbour. Vals panics if slot is out of range [0, Cap()].
func (t *Table[V]) Vals(slot int) []V {
	off := slot * t.dim
	return t.vals[off : off+t.dim : off+t.dim]
}

// State returns the dim*StateWidth() state values of slot, with the same
// aliasing rules as Vals. The state of value i of the slot is
// State(slot)[i*StateWidth() : (i+1)*StateWidth()]. State returns nil when
// StateWidth() is 0.
func (t *Table[V]) State(slot int) []V {
	if t.stride == 0 {
		return nil
	}
	off := slot * t.stride
	return t.state[off : off+t.stride : off+t.stride]
}

// Range calls fn for each key with its values and state (aliasing the
// table), in ascending slot order, which need not be key order and
// changes when the table grows. It stops when fn returns false. fn may
// modify vals and state but must not insert keys.
func (t *Table[V]) Range(fn func(key uint64, vals, state []V) bool) {
	for i, k := range t.keys[:t.Cap()] {
		if k != 0 && !fn(k, t.Vals(i), t.State(i)) {
			return
		}
	}
	if t.hasZero {
		c := t.Cap()
		fn(0, t.Vals(c), t.State(c))
	}
}

// SortedKeys returns the keys in ascending order, in a new slice.
func (t *Table[V]) SortedKeys() []uint64 {
	out := make([]uint64, 0, t.Len())
	if t.hasZero {
		out = append(out, 0)
	}
	for _, k := range t.keys[:t.Cap()] {
		if k != 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// MemoryBytes returns the bytes held by the key and value slices, excluding
// optimizer state (see StateBytes).
func (t *Table[V]) MemoryBytes() int {
	var v V
	return cap(t.keys)*8 + cap(t.vals)*int(unsafe.Sizeof(v))
}

// StateBytes returns the bytes held by the optimizer state slice.
func (t *Table[V]) StateBytes() int {
	var v V
	return cap(t.state) * int(unsafe.Sizeof(v))
}
