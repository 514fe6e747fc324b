package psnode

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/spindle-ps/spindle/psnode/store"
)

// StoreHandler is the built-in server handler: it keeps dim values per
// key in a store.Table and applies pushed values with an updater (sum
// aggregation, SGD, AdaGrad, FTRL-proximal, Adam), keeping the updater's
// state beside each value. A pull answers the stored values; keys never
// pushed read as zero and are not stored.
//
// Pushes with per-key lens are accepted only by the sum updater, which
// then keeps a variable-length table.
type StoreHandler[V Number] struct {
	upd store.Updater[V]
	dim int

	// mu guards the tables, for readers outside the handler goroutine
	// (snapshots, model output).
	mu    sync.Mutex
	table *store.Table[V]
	vtab  *store.VarTable[V]
	init  func(key uint64, vals []V)
	last  keptSlots
	// pulls are the most recent pulls' keys and slots, used in turn
	// (next); none are kept when noPullSlots is set.
	pulls       [recentPulls]keptSlots
	next        int
	noPullSlots bool
}

// keptSlots holds a list of keys and the table slots they were found at,
// so that a later request of the same keys in the same order reads or
// updates them by slot instead of looking every key up again, for as long
// as the table's Generation is unchanged. It costs 12 bytes a key, in
// buffers kept for reuse.
//
// A handler keeps two kinds. last is the most recent fixed-width push's:
// a pull of what it updated, or a push-pull, reads by its slots. pulls
// are recent pulls whose keys were all stored: a worker pulls a
// mini-batch's weights, computes, and pushes its gradients, which are
// applied by the pull's slots; the entry then serves as last.
type keptSlots struct {
	keys  []uint64
	slots []uint32
	gen   uint64 // the table's Generation when the slots were recorded
	ok    bool
}

// holds reports whether k holds valid slots for exactly keys in a table
// of generation gen.
func (k *keptSlots) holds(keys []uint64, gen uint64) bool {
	return k.ok && k.gen == gen && slices.Equal(k.keys, keys)
}

const (
	// recentPulls is how many pulls a handler keeps the slots of: a
	// worker's push follows its pull after the pulls its pipeline sends
	// ahead and the other workers' pulls in between.
	recentPulls = 16
	// maxPulledKeys bounds the keys of a pull kept, mini-batches rather
	// than whole models: the pulls' buffers hold 12 MiB at most.
	maxPulledKeys = 1 << 16
)

// SetInit sets the initial values of keys never pushed: a pure function
// of the key that fills vals (dim values, zero before the call). A pull
// of such a key answers them without storing the key, and the first push
// applies to them. nil (the default) means zeros. Call it before serving.
func (h *StoreHandler[V]) SetInit(init func(key uint64, vals []V)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init = init
	if init == nil {
		h.table.SetInit(nil)
		return
	}
	h.table.SetInit(func(key uint64, vals, _ []V) { init(key, vals) })
}

// NewStoreHandler makes a handler keeping dim values per key, updated by
// upd.
func NewStoreHandler[V Number](upd store.Updater[V], dim int) (*StoreHandler[V], error) {
	if dim < 1 {
		return nil, fmt.Errorf("psnode: store handler: dim %d: want at least 1", dim)
	}
	t, err := newStoreTable[V](dim, upd.StateWidth(), 0)
	if err != nil {
		return nil, err
	}
	vt, err := store.NewVarTable[V](0, store.MaxDim)
	if err != nil {
		return nil, fmt.Errorf("psnode: store handler: %w", err)
	}
	return &StoreHandler[V]{upd: upd, dim: dim, table: t, vtab: vt}, nil
}

// newStoreTable makes a handler's table, which chooses its layout by
// itself (store.Table.AutoDense): dense when the keys crowd a range
// enough, otherwise hashed, by their order when they spread evenly.
func newStoreTable[V Number](dim, stateWidth, capacityHint int) (*store.Table[V], error) {
	t, err := store.NewTable[V](dim, stateWidth, capacityHint)
	if err == nil {
		err = t.AutoDense(store.MaxDenseKeys)
	}
	if err != nil {
		return nil, fmt.Errorf("psnode: store handler: %w", err)
	}
	return t, nil
}

// DenseMaxBytes is the most a store handler's table allocates up front to
// address its server's key range directly (see UseKeyRange): 256 MiB, a
// range of about 22 million keys of one float32 value and no state. A hash
// table of as many keys takes more.
const DenseMaxBytes = 256 << 20

// UseKeyRange tells the handler that the keys it stores lie in [begin,
// last], as a server's keys do under the range partitioner with a bounded
// key space. When the values and state of the whole range fit in
// DenseMaxBytes, its table addresses each key directly instead of hashing
// it (store.Table.UseDenseRange): no hash or probe per key, neighbouring
// keys in neighbouring memory. A key outside the range is still stored,
// at the cost of laying the table out anew: hashed, or densely over a
// wider range when the keys still crowd one (store.Table.AutoDense, which
// a handler's table has on whether told a range or not). UseKeyRange
// reports whether the table went dense; call it before serving.
func (h *StoreHandler[V]) UseKeyRange(begin, last uint64) (bool, error) {
	if last < begin {
		return false, fmt.Errorf("psnode: store handler: key range [%d, %d] is empty", begin, last)
	}
	var v V
	perKey := uint64(8 + h.dim*(1+h.upd.StateWidth())*int(unsafe.Sizeof(v)))
	n := last - begin // keys - 1, which cannot overflow
	if n >= store.MaxDenseKeys || (n+1)*perKey > DenseMaxBytes {
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.table.UseDenseRange(begin, int(n+1)); err != nil {
		return false, fmt.Errorf("psnode: store handler: %w", err)
	}
	return true, nil
}

// Dense reports whether the handler's table addresses keys directly, as
// told by UseKeyRange or found by the table itself when its keys crowd a
// range; a key pushed far outside its range turns it into a hash table.
func (h *StoreHandler[V]) Dense() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.table.Dense()
}

// Layout names the way the handler's table finds a key's slot (see
// store.Table.Layout): "dense", "ordered" or "hashed".
func (h *StoreHandler[V]) Layout() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.table.Layout()
}

// Handle is the Handler to pass to NewKVServer.
func (h *StoreHandler[V]) Handle(req *KVRequest[V], srv *KVServer[V]) {
	ctx := srv.n.ctx
	if err := h.apply(req); err != nil {
		_ = srv.RespondError(ctx, req, err)
		return
	}
	if !req.Pull {
		_ = srv.Respond(ctx, req, KVPairs[V]{})
		return
	}
	res, err := h.read(req.Keys, req.Lens != nil)
	if err != nil {
		_ = srv.RespondError(ctx, req, err)
		return
	}
	_ = srv.Respond(ctx, req, res)
}

func (h *StoreHandler[V]) apply(req *KVRequest[V]) error {
	if !req.Push {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if req.Lens != nil {
		if h.upd.Name() != "sum" {
			return fmt.Errorf("%s updater needs %d values per key; variable lens need the sum updater", h.upd.Name(), h.dim)
		}
		off := 0
		for i, k := range req.Keys {
			g := req.Vals[off : off+int(req.Lens[i])]
			off += len(g)
			vals, _, _, err := h.vtab.Insert(k, len(g))
			if err != nil {
				return err
			}
			if len(vals) != len(g) {
				return fmt.Errorf("key %d holds %d values; a push of %d cannot be added", k, len(vals), len(g))
			}
			h.upd.Apply(vals, nil, g)
		}
		return nil
	}
	if err := h.checkWidth(req); err != nil {
		return err
	}
	l := &h.last
	l.ok = false
	if p := h.pulled(req.Keys); p != nil {
		if err := h.table.UpdateAt(p.slots, req.Vals, h.upd); err != nil {
			return err
		}
		// The pull's slots are the push's now; the entry takes the
		// buffers last had.
		*l, *p = *p, *l
		p.ok = false
		return nil
	}
	l.keys = append(l.keys[:0], req.Keys...)
	l.slots = grow(l.slots, len(req.Keys))
	ok, err := h.table.Update(req.Keys, req.Vals, h.upd, l.slots)
	l.ok, l.gen = ok && err == nil, h.table.Generation()
	return err
}

// keepPullSlots sets whether the handler keeps its recent pulls' slots
// for pushes of the same keys. A synchronous step of several workers
// applies the sum of their pushes, whose keys are no one pull's, so its
// store need not keep them.
func (h *StoreHandler[V]) keepPullSlots(keep bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noPullSlots = !keep
	if !keep {
		h.pulls = [recentPulls]keptSlots{}
	}
}

// pulled returns the recent pull of exactly keys whose slots are still
// valid, or nil.
func (h *StoreHandler[V]) pulled(keys []uint64) *keptSlots {
	gen := h.table.Generation()
	for i := range h.pulls {
		if p := &h.pulls[i]; p.holds(keys, gen) {
			return p
		}
	}
	return nil
}

func (h *StoreHandler[V]) read(keys []uint64, variable bool) (KVPairs[V], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	res := KVPairs[V]{} // keys are not echoed: the worker knows them
	if variable || h.vtab.Len() > 0 {
		res.Lens = make([]int32, len(keys))
		for i, k := range keys {
			v, _, _ := h.vtab.Lookup(k)
			res.Lens[i] = int32(len(v))
			res.Vals = append(res.Vals, v...)
		}
		return res, nil
	}
	d := h.dim
	res.Vals = make([]V, len(keys)*d)
	if l := &h.last; l.holds(keys, h.table.Generation()) {
		if err := h.table.ValsAt(l.slots, res.Vals); err != nil {
			return KVPairs[V]{}, err
		}
		return res, nil
	}
	var missing func(i int)
	if h.init != nil {
		missing = func(i int) { h.init(keys[i], res.Vals[i*d:(i+1)*d]) }
	}
	if h.noPullSlots || len(keys) == 0 || len(keys) > maxPulledKeys {
		if _, err := h.table.Gather(keys, res.Vals, missing); err != nil {
			return KVPairs[V]{}, err
		}
		return res, nil
	}
	p := &h.pulls[h.next]
	h.next = (h.next + 1) % recentPulls
	p.slots = grow(p.slots, len(keys))
	_, ok, err := h.table.GatherSlots(keys, res.Vals, missing, p.slots)
	if err != nil {
		p.ok = false
		return KVPairs[V]{}, err
	}
	p.keys = append(p.keys[:0], keys...)
	p.ok, p.gen = ok, h.table.Generation()
	return res, nil
}

// Range calls fn for every stored key with its values and updater state,
// holding the handler's lock: fn must not keep the slices.
func (h *StoreHandler[V]) Range(fn func(key uint64, vals, state []V) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.table.Range(fn)
}

// Len returns the number of keys stored.
func (h *StoreHandler[V]) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.table.Len() + h.vtab.Len()
}

// Get returns a copy of key's values, and whether the key is stored.
func (h *StoreHandler[V]) Get(key uint64) ([]V, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slot, ok := h.table.Lookup(key); ok {
		return append([]V(nil), h.table.Vals(slot)...), true
	}
	if v, _, ok := h.vtab.Lookup(key); ok {
		return append([]V(nil), v...), true
	}
	return nil, false
}

// Restore sets key's values and updater state, as a checkpoint recorded
// them; vals must hold dim values and state dim times the updater's state
// width. Restore before serving: it takes the lock, but a restore racing
// with pushes would mix old and new state.
func (h *StoreHandler[V]) Restore(key uint64, vals, state []V) error {
	if len(vals) != h.dim || len(state) != h.dim*h.upd.StateWidth() {
		return fmt.Errorf("psnode: restore key %d: %d values and %d state values, want %d and %d",
			key, len(vals), len(state), h.dim, h.dim*h.upd.StateWidth())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	slot, _ := h.table.Insert(key)
	copy(h.table.Vals(slot), vals)
	copy(h.table.State(slot), state)
	return nil
}

// RestoreAll is Restore for many keys at once, under one lock, with room
// made for them first: vals holds dim values per key and state dim times
// the updater's state width.
func (h *StoreHandler[V]) RestoreAll(keys []uint64, vals, state []V) error {
	d, sw := h.dim, h.dim*h.upd.StateWidth()
	if len(vals) != len(keys)*d || len(state) != len(keys)*sw {
		return fmt.Errorf("psnode: restore %d keys: %d values and %d state values, want %d and %d per key", len(keys), len(vals), len(state), d, sw)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.table.Reserve(len(keys)); err != nil {
		return fmt.Errorf("psnode: restore %d keys: %w", len(keys), err)
	}
	for i, k := range keys {
		slot, _ := h.table.Insert(k)
		copy(h.table.Vals(slot), vals[i*d:(i+1)*d])
		copy(h.table.State(slot), state[i*sw:(i+1)*sw])
	}
	return nil
}

// checkWidth refuses a push that does not carry dim values per key.
func (h *StoreHandler[V]) checkWidth(req *KVRequest[V]) error {
	if len(req.Vals) != len(req.Keys)*h.dim {
		return fmt.Errorf("push of %d values for %d keys: the server keeps %d per key", len(req.Vals), len(req.Keys), h.dim)
	}
	return nil
}

// Dim returns the number of values per key.
func (h *StoreHandler[V]) Dim() int { return h.dim }

// StateWidth returns the updater's state values per value.
func (h *StoreHandler[V]) StateWidth() int { return h.upd.StateWidth() }

// Snapshot calls fn with the number of stored keys and an iterator over
// them (key, values, updater state), holding the handler's lock, so that
// the two agree and no push lands in between: a consistent copy for a
// checkpoint. Pushes wait until fn returns. Keys pushed with per-key
// lengths (sum updater only) are not included.
func (h *StoreHandler[V]) Snapshot(fn func(records int, all func(yield func(key uint64, vals, state []V) bool)) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fn(h.table.Len(), h.table.Range)
}

// Retain keeps the stored keys keep accepts and drops the others, with
// their values and updater state: what a server hands over when the job
// changes its servers (Tables.Rescale). It rebuilds the table, keeping the
// initial values, and fails on a table of keys of varying lengths.
func (h *StoreHandler[V]) Retain(keep func(key uint64) bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.vtab.Len() > 0 {
		return fmt.Errorf("psnode: store handler: %d keys of varying lengths cannot move", h.vtab.Len())
	}
	kept := 0
	h.table.Range(func(key uint64, _, _ []V) bool {
		if keep(key) {
			kept++
		}
		return true
	})
	t, err := newStoreTable[V](h.dim, h.upd.StateWidth(), kept)
	if err != nil {
		return err
	}
	h.table.Range(func(key uint64, vals, state []V) bool {
		if keep(key) {
			slot, _ := t.Insert(key)
			copy(t.Vals(slot), vals)
			copy(t.State(slot), state)
		}
		return true
	})
	if h.init != nil {
		init := h.init
		t.SetInit(func(key uint64, vals, _ []V) { init(key, vals) })
	}
	h.table, h.last, h.pulls = t, keptSlots{}, [recentPulls]keptSlots{}
	return nil
}
