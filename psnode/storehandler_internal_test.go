package psnode

import (
	"fmt"
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
		used := h.last.holds(ks, h.table.Generation())
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

// TestStoreHandlerPushAfterPull checks that a push of the keys of a recent
// pull, all of them stored, is applied by the pull's slots, and otherwise
// by lookups, and that either way the table ends bit-identical to one
// that looked every key up: with two workers' pulls sent ahead of their
// pushes, pulls of absent keys, a table that grows between a pull and its
// push, more pulls in between than are kept, and slots not kept.
func TestStoreHandlerPushAfterPull(t *testing.T) {
	upd, err := store.NewUpdater[float32]("ftrl", nil)
	if err != nil {
		t.Fatal(err)
	}
	const dim = 2
	h, err := NewStoreHandler[float32](upd, dim)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
	rng := rand.New(rand.NewPCG(3, 4))
	batch := func(n int, space uint64) []uint64 {
		k := make([]uint64, n)
		for i := range k {
			k[i] = rng.Uint64N(space)
		}
		slices.Sort(k)
		return slices.Compact(k)
	}
	pull := func(ks []uint64) {
		t.Helper()
		if _, err := h.read(ks, false); err != nil {
			t.Fatal(err)
		}
	}
	push := func(what string, ks []uint64, bySlot bool) {
		t.Helper()
		if got := h.pulled(ks) != nil; got != bySlot {
			t.Fatalf("%s: applied by a pull's slots: %v, want %v", what, got, bySlot)
		}
		g := make([]float32, dim*len(ks))
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		req := &KVRequest[float32]{KVMeta: KVMeta{Push: true}, KVPairs: KVPairs[float32]{Keys: ks, Vals: g}}
		if err := h.apply(req); err != nil {
			t.Fatal(err)
		}
		if _, err := ref.Update(ks, g, upd, nil); err != nil {
			t.Fatal(err)
		}
		if bySlot && h.pulled(ks) != nil {
			t.Fatalf("%s: the pull's slots serve a second push", what)
		}
	}
	// Two workers, each pulling two batches ahead of the one it pushes. A
	// pull keeps its slots when every key is stored: early on some are
	// absent, and the push looks its keys up.
	type pulled struct {
		keys   []uint64
		stored bool
	}
	var ahead [2][]pulled
	bySlot := 0
	for step := range 40 {
		for w := range 2 {
			b := batch(300, 1000)
			stored := true
			for _, k := range b {
				if _, ok := h.table.Lookup(k); !ok {
					stored = false
				}
			}
			pull(b)
			ahead[w] = append(ahead[w], pulled{b, stored})
			if len(ahead[w]) < 3 {
				continue
			}
			p := ahead[w][0]
			ahead[w] = ahead[w][1:]
			push(fmt.Sprintf("step %d, worker %d", step, w), p.keys, p.stored)
			if p.stored {
				bySlot++
			}
		}
	}
	if bySlot < 20 {
		t.Fatalf("%d of 76 pushes applied by slot, want most", bySlot)
	}
	// A push the pull's slots no longer fit: the table grew in between.
	a := batch(300, 5000)
	push("before growth", a, false)
	pull(a)
	gen := h.table.Generation()
	push("growth", batch(70_000, 1<<40), false)
	if h.table.Generation() == gen {
		t.Fatal("70,000 new keys did not grow the table")
	}
	push("after growth", a, false)
	// More pulls in between than are kept.
	pull(a)
	for range recentPulls {
		pull(batch(10, 5000))
	}
	push("after 16 other pulls", a, false)
	// A pull larger than a mini-batch is not kept.
	big := h.table.SortedKeys()[:maxPulledKeys+1]
	pull(big)
	push("large", big, false)
	// Nor is any while the handler is told not to keep them.
	h.keepPullSlots(false)
	pull(a)
	push("not kept", a, false)
	h.keepPullSlots(true)
	pull(a[:200]) // not a itself, which a pull reads by the last push's slots
	push("kept again", a[:200], true)

	if h.table.Len() != ref.Len() {
		t.Fatalf("%d keys stored, want %d", h.table.Len(), ref.Len())
	}
	ref.Range(func(k uint64, vals, state []float32) bool {
		s, ok := h.table.Lookup(k)
		if !ok || !slices.Equal(h.table.Vals(s), vals) || !slices.Equal(h.table.State(s), state) {
			t.Fatalf("key %d: %v %v, want %v %v", k, h.table.Vals(s), h.table.State(s), vals, state)
		}
		return true
	})
}

// BenchmarkStoreHandlerBatch is a server's work for a worker's
// mini-batches: the pull of a batch's keys (1,500 of 200,000 stored,
// hashed ids) and the push of their gradients (FTRL), two batches pulled
// ahead of the one pushed as ps-lr's pipeline does. pulls=kept applies a
// push by its pull's slots, pulls=forgotten looks its keys up again. It
// reports ns per key of a batch (one pull and one push).
func BenchmarkStoreHandlerBatch(b *testing.B) {
	for _, kept := range []bool{true, false} {
		name := map[bool]string{true: "kept", false: "forgotten"}[kept]
		b.Run("pulls="+name, func(b *testing.B) {
			upd, _ := store.NewUpdater[float32]("ftrl", nil)
			h, _ := NewStoreHandler[float32](upd, 1)
			h.keepPullSlots(kept)
			rng := rand.New(rand.NewPCG(5, 6))
			ids := make([]uint64, 200_000)
			for i := range ids {
				ids[i] = rng.Uint64()
			}
			all := slices.Sorted(slices.Values(ids))
			if err := h.apply(&KVRequest[float32]{KVMeta: KVMeta{Push: true}, KVPairs: KVPairs[float32]{Keys: all, Vals: make([]float32, len(all))}}); err != nil {
				b.Fatal(err)
			}
			const n = 1500
			batches := make([][]uint64, 64)
			for i := range batches {
				ks := make([]uint64, n)
				for j := range ks {
					ks[j] = ids[rng.IntN(len(ids))]
				}
				slices.Sort(ks)
				batches[i] = slices.Compact(ks)
			}
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
			keys := 0
			b.ResetTimer()
			for i := range b.N {
				if _, err := h.read(batches[(i+2)%len(batches)], false); err != nil {
					b.Fatal(err)
				}
				ks := batches[i%len(batches)]
				req := &KVRequest[float32]{KVMeta: KVMeta{Push: true}, KVPairs: KVPairs[float32]{Keys: ks, Vals: g[:len(ks)]}}
				if err := h.apply(req); err != nil {
					b.Fatal(err)
				}
				keys += len(ks)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
		})
	}
}
