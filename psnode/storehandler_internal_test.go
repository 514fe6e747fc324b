package psnode

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/store"
)

// TestStoreHandlerPullAfterPush checks that pulls answered from the slots
// of the last push agree with lookups, also once other pushes have grown
// the table (which moves every key) and with keys in another order.
func TestStoreHandlerPullAfterPush(t *testing.T) {
	upd, err := store.NewUpdater[float32]("sum", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewStoreHandler[float32](upd, 2)
	if err != nil {
		t.Fatal(err)
	}
	h.SetInit(func(key uint64, vals []float32) { vals[0] = float32(key % 5) })
	rng := rand.New(rand.NewPCG(1, 2))
	keys := func(n int) []uint64 {
		k := make([]uint64, n)
		for i := range k {
			k[i] = rng.Uint64N(1 << 20)
		}
		slices.Sort(k)
		return slices.Compact(k)
	}
	ref := map[uint64][2]float32{}
	push := func(ks []uint64) {
		req := &KVRequest[float32]{KVMeta: KVMeta{Push: true}, KVPairs: KVPairs[float32]{Keys: ks, Vals: make([]float32, 2*len(ks))}}
		for i, k := range ks {
			v, ok := ref[k]
			if !ok {
				v[0] = float32(k % 5)
			}
			for j := range 2 {
				g := float32(rng.IntN(100))
				req.Vals[2*i+j] = g
				v[j] += g
			}
			ref[k] = v
		}
		if err := h.apply(req); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, ks []uint64, fromSlots bool) {
		t.Helper()
		used := h.last.ok && h.last.gen == h.table.Generation() && slices.Equal(h.last.keys, ks)
		if used != fromSlots {
			t.Fatalf("%s: answered from the last push's slots: %v, want %v", what, used, fromSlots)
		}
		res, err := h.read(ks, false)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range ks {
			want, ok := ref[k]
			if !ok {
				want = [2]float32{float32(k % 5), 0}
			}
			if got := [2]float32(res.Vals[2*i : 2*i+2]); got != want {
				t.Fatalf("%s: key %d = %v, want %v", what, k, got, want)
			}
		}
	}
	a := keys(3000)
	push(a)
	check("pull after push", a, true)
	b := keys(20000) // grows the table: a's slots move
	push(a)
	push(b)
	check("pull of other keys", a, false)
	push(a)
	check("pull after pushing again", a, true)
	// Restoring keys grows the table without a push: the slots go stale.
	gen := h.table.Generation()
	for _, k := range keys(40000) {
		if _, ok := ref[k]; !ok {
			ref[k] = [2]float32{1, 2}
			if err := h.Restore(k, []float32{1, 2}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if h.table.Generation() == gen {
		t.Fatal("restoring 40000 keys did not grow the table")
	}
	check("pull after the table grew", a, false)
	push(a)
	rev := slices.Clone(a)
	slices.Reverse(rev)
	check("pull in another order", rev, false)
	check("pull of never-pushed keys", keys(100), false)
}

// TestStoreHandlerUseKeyRange checks which ranges go dense (those whose
// values and state fit in DenseMaxBytes), that pushes and pulls inside
// and outside the range answer what a hash table does, and which server
// ranges the framework derives from a partitioner.
func TestStoreHandlerUseKeyRange(t *testing.T) {
	adam, _ := store.NewUpdater[float32]("adam", nil) // three state values per value
	for _, c := range []struct {
		dim         int
		begin, last uint64
		want        bool
	}{
		{1, 0, 999, true},
		{1, 1 << 50, 1<<50 + 999, true},
		{1, 0, DenseMaxBytes/(8+4*4) - 1, true},
		{1, 0, DenseMaxBytes / (8 + 4*4), false},
		{64, 0, 1 << 20, false},
		{1, 0, 1<<64 - 1, false},
	} {
		h, _ := NewStoreHandler[float32](adam, c.dim)
		got, err := h.UseKeyRange(c.begin, c.last)
		if err != nil || got != c.want || h.Dense() != c.want {
			t.Errorf("dim %d, [%d, %d]: UseKeyRange = %v, %v; Dense %v; want %v", c.dim, c.begin, c.last, got, err, h.Dense(), c.want)
		}
	}
	sum, _ := store.NewUpdater[float32]("sum", nil)
	h, _ := NewStoreHandler[float32](sum, 1)
	if _, err := h.UseKeyRange(10, 9); err == nil {
		t.Error("UseKeyRange(10, 9) of an empty range: no error")
	}
	if ok, _ := h.UseKeyRange(100, 199); !ok {
		t.Fatal("[100, 199] did not go dense")
	}
	push, pull := handlerOps(t, h)
	push(100, 150, 199)
	push(150)
	pull([]float32{100, 300, 199, 0}, 100, 150, 199, 120)
	if !h.Dense() {
		t.Fatal("keys of the range made the table a hash table")
	}
	push(5, 150, 1000)
	if h.Dense() {
		t.Fatal("keys outside the range left the table dense")
	}
	pull([]float32{5, 100, 450, 199, 1000}, 5, 100, 150, 199, 1000)

	for _, c := range []struct {
		kind          string
		servers, rank int
		maxKey        uint64
		begin, last   uint64
		ok            bool
	}{
		{"range", 2, 1, 1000, 500, 999, true},
		{"range", 2, 0, 1000, 0, 499, true},
		{"hash", 1, 0, 1000, 0, 999, true},
		{"hash", 2, 0, 1000, 0, 0, false},
		{"range", 2, 0, 0, 0, 0, false},
		{"range", 2, -1, 1000, 0, 0, false},
	} {
		r, ok := serverKeyRange(c.kind, c.servers, c.maxKey, c.rank)
		if ok != c.ok || ok && (r.Begin != c.begin || r.Last != c.last) {
			t.Errorf("serverKeyRange(%s, %d servers, max %d, rank %d) = %v, %v; want [%d, %d], %v", c.kind, c.servers, c.maxKey, c.rank, r, ok, c.begin, c.last, c.ok)
		}
	}
}

// handlerOps returns functions that push keys to h, each with its own
// value as its gradient, and that pull keys from it, as the handler
// applies and answers requests.
func handlerOps(t *testing.T, h *StoreHandler[float32]) (push func(keys ...uint64), pull func(want []float32, keys ...uint64)) {
	push = func(keys ...uint64) {
		t.Helper()
		vals := make([]float32, len(keys))
		for i, k := range keys {
			vals[i] = float32(k)
		}
		if err := h.apply(&KVRequest[float32]{KVMeta: KVMeta{Push: true}, KVPairs: KVPairs[float32]{Keys: keys, Vals: vals}}); err != nil {
			t.Fatal(err)
		}
	}
	pull = func(want []float32, keys ...uint64) {
		t.Helper()
		res, err := h.read(keys, false)
		if err != nil || !slices.Equal(res.Vals, want) {
			t.Fatalf("pull %v = %v, %v; want %v", keys, res.Vals, err, want)
		}
	}
	return push, pull
}

// TestStoreHandlerFindsCrowdedKeys: a handler told no key range lays its
// table out densely once the keys it holds crowd a range, and hashes them
// again when a far key arrives, answering every pull right throughout,
// also a pull of the keys just pushed, which reads by the push's slots.
func TestStoreHandlerFindsCrowdedKeys(t *testing.T) {
	t.Parallel()
	sum, _ := store.NewUpdater[float32]("sum", nil)
	h, _ := NewStoreHandler[float32](sum, 1)
	push, pull := handlerOps(t, h)
	var keys []uint64
	var want []float32
	for k := uint64(1 << 40); k < 1<<40+3000; k++ {
		keys = append(keys, k)
		want = append(want, 2*float32(k))
	}
	push(keys...)
	push(keys...)
	pull(want, keys...)
	if !h.Dense() {
		t.Fatal("3000 consecutive keys left the table hashed")
	}
	far := uint64(1 << 60)
	push(far)
	if h.Dense() {
		t.Fatal("a key 2^60 away left the table dense")
	}
	pull(append(want, float32(far), 0), append(keys, far, far+1)...)
	push(keys[:10]...)
	pull([]float32{3 * float32(keys[0]), 3 * float32(keys[9])}, keys[0], keys[9])
}
