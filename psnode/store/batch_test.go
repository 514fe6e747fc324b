package store_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/store"
)

// batchKeys returns n distinct sorted keys drawn from a seeded generator,
// with 0 and math.MaxUint64 among them, and a second set of 4n/5 keys,
// about half of them in the first: pushed after the first, it grows the
// table part-way through.
func batchKeys(seed uint64, n int) (a, b []uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	seen := map[uint64]bool{0: true, math.MaxUint64: true}
	a = []uint64{0, math.MaxUint64}
	for len(a) < n {
		k := rng.Uint64() >> rng.IntN(60) // small keys too: neighbours collide in the hash
		if !seen[k] {
			seen[k] = true
			a = append(a, k)
		}
	}
	for _, k := range a {
		if rng.IntN(2) == 0 {
			b = append(b, k)
		}
	}
	for len(b) < n*4/5 {
		k := rng.Uint64()
		if !seen[k] {
			seen[k] = true
			b = append(b, k)
		}
	}
	slices.Sort(a)
	slices.Sort(b)
	return a, b
}

// TestTableUpdateMatchesInsertApply applies the same pushes with Update and
// with Insert plus Apply per key, for every updater, several widths and
// an init function, and requires bit-identical values and state, and
// Gather to return what Lookup finds.
func TestTableUpdateMatchesInsertApply(t *testing.T) {
	t.Parallel()
	for _, name := range store.UpdaterNames() {
		for _, dim := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/dim=%d", name, dim), func(t *testing.T) {
				t.Parallel()
				upd, err := store.NewUpdater[float32](name, nil)
				if err != nil {
					t.Fatal(err)
				}
				init := func(key uint64, vals, _ []float32) {
					for i := range vals {
						vals[i] = float32(key%7) + float32(i)
					}
				}
				batch, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
				ref, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
				batch.SetInit(init)
				ref.SetInit(init)
				rng := rand.New(rand.NewPCG(3, 4))
				grew := 0
				a, b := batchKeys(11, 5000)
				for _, keys := range [][]uint64{a, b, a, b[:37], nil} {
					if pushBoth(t, rng, batch, ref, upd, keys) {
						grew++
					}
				}
				if grew == 0 || grew == 5 {
					t.Errorf("Update reported moved slots in %d of 5 rounds; the table grows in some, not all", grew)
				}
				sameTables(t, batch, ref)
				// Gather over stored and absent keys.
				probe := append(append([]uint64(nil), a...), 12345678901, 1<<63+5)
				out := make([]float32, len(probe)*dim)
				for i := range out {
					out[i] = -1 // Gather must overwrite everything
				}
				var missed []int
				found, err := batch.Gather(probe, out, func(i int) { missed = append(missed, i) })
				if err != nil {
					t.Fatal(err)
				}
				wantMissed := []int{}
				for i, k := range probe {
					s, ok := batch.Lookup(k)
					want := make([]float32, dim)
					if ok {
						want = batch.Vals(s)
					} else {
						wantMissed = append(wantMissed, i)
					}
					if !bitsEqual(out[i*dim:(i+1)*dim], want) {
						t.Fatalf("Gather key %d = %v, want %v", k, out[i*dim:(i+1)*dim], want)
					}
				}
				if found != len(probe)-len(wantMissed) || !slices.Equal(missed, wantMissed) && len(wantMissed) > 0 {
					t.Fatalf("Gather found %d, missing %v; want %d, %v", found, missed, len(probe)-len(wantMissed), wantMissed)
				}
			})
		}
	}
}

// TestTableUpdateParallel applies pushes large enough for Update to split
// them between goroutines (three, whatever the machine's processors)
// with every updater, and requires the values and state of Insert plus
// Apply per key, bit for bit: sorted keys with key 0 into an empty
// table; then sorted keys, half of them stored, with more new keys than
// the table takes before it grows, so that the goroutines run out of
// room part-way; then unsorted keys, each several times, which Update
// applies in one goroutine. Slots Update says are valid must read the
// keys' values, and a large Gather must find what Lookup finds.
func TestTableUpdateParallel(t *testing.T) {
	defer store.SetTestParts(3)()
	const n = 190_000 // above parallelMin, and the table of n keys is near its load
	a, b := batchKeys(21, n)
	rng := rand.New(rand.NewPCG(8, 9))
	c := make([]uint64, 0, 3*n/2)
	for range cap(c) {
		c = append(c, a[rng.IntN(len(a)/2)]) // each about three times
	}
	c = append(c, 0, 0)
	for _, name := range store.UpdaterNames() {
		for _, dim := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/dim=%d", name, dim), func(t *testing.T) {
				upd, err := store.NewUpdater[float32](name, nil)
				if err != nil {
					t.Fatal(err)
				}
				batch, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
				ref, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
				grew := 0
				for _, keys := range [][]uint64{a, b, c} {
					if pushBoth(t, rng, batch, ref, upd, keys) {
						grew++
					}
				}
				if grew != 1 {
					t.Errorf("Update reported moved slots in %d of 3 rounds, want 1 (the second grows the table)", grew)
				}
				sameTables(t, batch, ref)
				probe := append(append([]uint64(nil), b...), 12345678901, 1<<63+5)
				out := make([]float32, len(probe)*dim)
				for i := range out {
					out[i] = -1 // Gather must overwrite everything
				}
				found, err := batch.Gather(probe, out, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				for i, k := range probe {
					v := make([]float32, dim)
					if s, ok := batch.Lookup(k); ok {
						v = batch.Vals(s)
						want++
					}
					if !bitsEqual(out[i*dim:(i+1)*dim], v) {
						t.Fatalf("Gather key %d = %v, want %v", k, out[i*dim:(i+1)*dim], v)
					}
				}
				if found != want {
					t.Errorf("Gather found %d keys, want %d", found, want)
				}
			})
		}
	}
}

// pushBoth pushes random gradients for keys into batch through Update and
// into ref through Insert and Apply per key, and checks the values read
// by the slots Update recorded when it says they are valid. It reports
// whether Update said they were not (the table grew).
func pushBoth(t *testing.T, rng *rand.Rand, batch, ref *store.Table[float32], upd store.Updater[float32], keys []uint64) bool {
	t.Helper()
	dim := batch.Dim()
	g := make([]float32, len(keys)*dim)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	slots := make([]uint32, len(keys))
	ok, err := batch.Update(keys, g, upd, slots)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	for i, k := range keys {
		s, _ := ref.Insert(k)
		upd.Apply(ref.Vals(s), ref.State(s), g[i*dim:(i+1)*dim])
	}
	if !ok {
		return true
	}
	checkSlots(t, batch, keys, slots)
	return false
}

// sameTables checks that batch holds the keys of ref, with the same
// values and state, bit for bit.
func sameTables(t *testing.T, batch, ref *store.Table[float32]) {
	t.Helper()
	if batch.Len() != ref.Len() {
		t.Fatalf("Update stored %d keys, Insert %d", batch.Len(), ref.Len())
	}
	ref.Range(func(k uint64, vals, state []float32) bool {
		s, ok := batch.Lookup(k)
		if !ok {
			t.Fatalf("key %d missing after Update", k)
		}
		if !bitsEqual(batch.Vals(s), vals) || !bitsEqual(batch.State(s), state) {
			t.Fatalf("key %d: Update gave %v %v, Insert+Apply %v %v", k, batch.Vals(s), batch.State(s), vals, state)
		}
		return true
	})
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestTableUpdateGatherLengths(t *testing.T) {
	t.Parallel()
	tab, _ := store.NewTable[float32](2, 0, 0)
	if _, err := tab.Update([]uint64{1, 2}, make([]float32, 3), store.Sum[float32]{}, nil); !errors.Is(err, store.ErrLength) {
		t.Errorf("Update with 3 values for 2 keys of 2: error %v, want ErrLength", err)
	}
	ftrl, _ := store.NewUpdater[float32](store.NameFTRL, nil)
	if _, err := tab.Update([]uint64{1}, make([]float32, 2), ftrl, nil); !errors.Is(err, store.ErrLength) {
		t.Errorf("Update with an updater whose state the table lacks: error %v, want ErrLength", err)
	}
	if _, err := tab.Update([]uint64{1}, make([]float32, 2), store.Sum[float32]{}, make([]uint32, 2)); !errors.Is(err, store.ErrLength) {
		t.Errorf("Update with room for 2 slots for 1 key: error %v, want ErrLength", err)
	}
	if _, err := tab.Gather([]uint64{1, 2}, make([]float32, 2), nil); !errors.Is(err, store.ErrLength) {
		t.Errorf("Gather into room for 2 values for 2 keys of 2: error %v, want ErrLength", err)
	}
	if _, _, err := tab.GatherSlots([]uint64{1, 2}, make([]float32, 4), nil, make([]uint32, 1)); !errors.Is(err, store.ErrLength) {
		t.Errorf("GatherSlots with room for 1 slot for 2 keys: error %v, want ErrLength", err)
	}
	if err := tab.UpdateAt([]uint32{0}, make([]float32, 1), store.Sum[float32]{}); !errors.Is(err, store.ErrLength) {
		t.Errorf("UpdateAt with 1 value for 1 slot of 2: error %v, want ErrLength", err)
	}
	if err := tab.UpdateAt([]uint32{0}, make([]float32, 2), ftrl); !errors.Is(err, store.ErrLength) {
		t.Errorf("UpdateAt with an updater whose state the table lacks: error %v, want ErrLength", err)
	}
	if tab.Len() != 0 {
		t.Errorf("failed calls stored %d keys", tab.Len())
	}
}

// TestGatherSlotsAndUpdateAt: GatherSlots calls its slots valid only when
// every key is stored, and UpdateAt refuses a slot outside the table (the
// zero key's slot too, while the zero key is not stored) without applying
// any of the gradients.
func TestGatherSlotsAndUpdateAt(t *testing.T) {
	t.Parallel()
	tab, _ := store.NewTable[float32](1, 0, 0)
	upd := store.Sum[float32]{}
	if _, err := tab.Update([]uint64{3, 5, 9}, []float32{1, 2, 3}, upd, nil); err != nil {
		t.Fatal(err)
	}
	slots := make([]uint32, 3)
	out := make([]float32, 3)
	if found, ok, err := tab.GatherSlots([]uint64{3, 4, 9}, out, nil, slots); err != nil || found != 2 || ok {
		t.Fatalf("GatherSlots with an absent key: found %d, ok %v, %v; want 2, false", found, ok, err)
	}
	found, ok, err := tab.GatherSlots([]uint64{9, 3}, out[:2], nil, slots[:2])
	if err != nil || found != 2 || !ok || out[0] != 3 || out[1] != 1 {
		t.Fatalf("GatherSlots of stored keys: found %d, ok %v, %v, values %v", found, ok, err, out[:2])
	}
	for _, bad := range [][]uint32{{slots[0], uint32(tab.Cap()) + 1}, {slots[1], uint32(tab.Cap())}} {
		if err := tab.UpdateAt(bad, []float32{10, 10}, upd); !errors.Is(err, store.ErrSlot) {
			t.Errorf("UpdateAt(%v) in a table of %d slots: error %v, want ErrSlot", bad, tab.Cap(), err)
		}
	}
	if err := tab.UpdateAt(slots[:2], []float32{10, 20}, upd); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[uint64]float32{3: 21, 5: 2, 9: 13} {
		if s, ok := tab.Lookup(k); !ok || tab.Vals(s)[0] != want {
			t.Errorf("key %d: %v, want %v", k, tab.Vals(s), want)
		}
	}
	// The zero key's slot is the table's last, once it is stored.
	if _, err := tab.Update([]uint64{0}, []float32{4}, upd, nil); err != nil {
		t.Fatal(err)
	}
	if found, ok, err := tab.GatherSlots([]uint64{0}, out[:1], nil, slots[:1]); err != nil || found != 1 || !ok {
		t.Fatalf("GatherSlots of the zero key: found %d, ok %v, %v", found, ok, err)
	}
	if err := tab.UpdateAt(slots[:1], []float32{1}, upd); err != nil {
		t.Fatal(err)
	}
	if s, ok := tab.Lookup(0); !ok || tab.Vals(s)[0] != 5 {
		t.Errorf("zero key: %v, want 5", tab.Vals(s))
	}
}

// BenchmarkUpdate pushes 10,000,000 random sorted keys into an empty table
// with the sum updater (growing it) and again (all keys present), then
// gathers them, through Update and Gather, and through Insert, Apply and
// Lookup per key for comparison. Run with -benchtime=1x.
func BenchmarkUpdate(b *testing.B) {
	const n = 10_000_000
	keys, _ := benchKeys(n)
	slices.Sort(keys)
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(i % 1000)
	}
	out := make([]float32, n)
	upd := store.Sum[float32]{}
	for _, impl := range []string{"batch", "perkey"} {
		b.Run("keys=10000000/impl="+impl, func(b *testing.B) {
			var first, second, gather time.Duration
			for b.Loop() {
				tab, _ := store.NewTable[float32](1, 0, 0)
				for round := range 2 {
					start := time.Now()
					if impl == "batch" {
						if _, err := tab.Update(keys, g, upd, nil); err != nil {
							b.Fatal(err)
						}
					} else {
						var u store.Updater[float32] = upd
						for i, k := range keys {
							s, _ := tab.Insert(k)
							u.Apply(tab.Vals(s), tab.State(s), g[i:i+1])
						}
					}
					if round == 0 {
						first += time.Since(start)
					} else {
						second += time.Since(start)
					}
				}
				start := time.Now()
				if impl == "batch" {
					if _, err := tab.Gather(keys, out, nil); err != nil {
						b.Fatal(err)
					}
				} else {
					for i, k := range keys {
						if s, ok := tab.Lookup(k); ok {
							out[i] = tab.Vals(s)[0]
						}
					}
				}
				gather += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/first.Seconds()/1e6, "Mnew/s")
			b.ReportMetric(float64(n*b.N)/second.Seconds()/1e6, "Mupdates/s")
			b.ReportMetric(float64(n*b.N)/gather.Seconds()/1e6, "Mgathers/s")
		})
	}
}
