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
