package store_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/store"
)

// TestDenseTableMatchesHashTable runs the same pushes, inserts, lookups
// and gathers on a dense table and on a hash table, for every updater, two
// widths, ranges starting at 0 (where key 0 has its own slot) and above,
// and requires the same keys, bit-identical values and state, and the same
// answers; the last round pushes keys outside the range, which turns the
// dense table into a hash table without losing anything.
func TestDenseTableMatchesHashTable(t *testing.T) {
	t.Parallel()
	for _, name := range store.UpdaterNames() {
		for _, dim := range []int{1, 3} {
			for _, base := range []uint64{0, 1 << 40} {
				t.Run(fmt.Sprintf("%s/dim=%d/base=%d", name, dim, base), func(t *testing.T) {
					t.Parallel()
					upd, err := store.NewUpdater[float32](name, nil)
					if err != nil {
						t.Fatal(err)
					}
					init := func(key uint64, vals, _ []float32) {
						for i := range vals {
							vals[i] = float32(key%5) - float32(i)
						}
					}
					const n = 3000
					dense, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
					ref, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
					if err := dense.UseDenseRange(base, n); err != nil {
						t.Fatal(err)
					}
					dense.SetInit(init)
					ref.SetInit(init)
					rng := rand.New(rand.NewPCG(5, uint64(dim)))
					inRange := func(m int) []uint64 {
						ks := make([]uint64, m)
						for i := range ks {
							ks[i] = base + uint64(rng.IntN(n))
						}
						if base == 0 {
							ks[0] = 0
						}
						return ks
					}
					outside := append(inRange(50), base+n, base+n+7, math.MaxUint64, 0)
					if base > 0 {
						outside = append(outside, base-1)
					}
					rounds := [][]uint64{inRange(2000), inRange(500), {}, inRange(2500), outside}
					for round, keys := range rounds {
						gen := dense.Generation()
						g := make([]float32, len(keys)*dim)
						for i := range g {
							g[i] = float32(rng.NormFloat64())
						}
						slots := make([]uint32, len(keys))
						ok, err := dense.Update(keys, g, upd, slots)
						if err != nil {
							t.Fatalf("round %d: Update: %v", round, err)
						}
						for i, k := range keys {
							s, _ := ref.Insert(k)
							upd.Apply(ref.Vals(s), ref.State(s), g[i*dim:(i+1)*dim])
						}
						last := round == len(rounds)-1
						if isDense := dense.Dense(); isDense == last {
							t.Fatalf("round %d: dense = %v", round, isDense)
						}
						if ok == last || (dense.Generation() != gen) != last {
							t.Fatalf("round %d: Update reported valid slots %v, generation %d -> %d", round, ok, gen, dense.Generation())
						}
						if ok {
							checkSlots(t, dense, keys, slots)
						}
						compareTables(t, dense, ref, append(slices.Clone(outside), base+n/2, base+n-1, 1))
					}
				})
			}
		}
	}
}

// compareTables requires a and b to hold the same keys with bit-identical
// values and state, and Gather over probe (stored and absent keys) to agree.
func compareTables(t *testing.T, a, b *store.Table[float32], probe []uint64) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("%d keys, want %d", a.Len(), b.Len())
	}
	if !slices.Equal(a.SortedKeys(), b.SortedKeys()) {
		t.Fatal("SortedKeys differ")
	}
	b.Range(func(k uint64, vals, state []float32) bool {
		s, ok := a.Lookup(k)
		if !ok {
			t.Fatalf("key %d missing", k)
		}
		if a.Key(s) != k || !bitsEqual(a.Vals(s), vals) || !bitsEqual(a.State(s), state) {
			t.Fatalf("key %d: %d %v %v, want %v %v", k, a.Key(s), a.Vals(s), a.State(s), vals, state)
		}
		return true
	})
	// The probe keys as given, then ascending, as a request's are.
	d := a.Dim()
	for _, keys := range [][]uint64{probe, slices.Compact(slices.Sorted(slices.Values(probe)))} {
		outA, outB := make([]float32, len(keys)*d), make([]float32, len(keys)*d)
		for i := range outA {
			outA[i], outB[i] = -1, -2
		}
		var missA, missB []int
		fa, err := a.Gather(keys, outA, func(i int) { missA = append(missA, i) })
		if err != nil {
			t.Fatal(err)
		}
		fb, _ := b.Gather(keys, outB, func(i int) { missB = append(missB, i) })
		if fa != fb || !slices.Equal(missA, missB) || !bitsEqual(outA, outB) {
			t.Fatalf("Gather: found %d, missing %v, %v; want %d, %v, %v", fa, missA, outA, fb, missB, outB)
		}
		// Without a missing function the same (absent keys read zero).
		clear(outA)
		if fa, err = a.Gather(keys, outA, nil); err != nil || fa != fb || !bitsEqual(outA, outB) {
			t.Fatalf("Gather without missing: found %d (%v), %v; want %d, %v", fa, err, outA, fb, outB)
		}
	}
	for _, k := range probe {
		_, okA := a.Lookup(k)
		_, okB := b.Lookup(k)
		if okA != okB {
			t.Fatalf("Lookup(%d) = %v, want %v", k, okA, okB)
		}
	}
}

// TestDenseTableInsert covers Insert and Reserve on a dense table: keys of
// the range sit at key-base and keep their slots whatever else is
// inserted; a key outside the range moves them once.
func TestDenseTableInsert(t *testing.T) {
	t.Parallel()
	tab, _ := store.NewTable[float64](2, 1, 0)
	if err := tab.UseDenseRange(100, 50); err != nil {
		t.Fatal(err)
	}
	if err := tab.Reserve(1 << 20); err != nil {
		t.Fatalf("Reserve on a dense table: %v", err)
	}
	gen := tab.Generation()
	for k := uint64(100); k < 150; k++ {
		s, inserted := tab.Insert(k)
		if !inserted || s != int(k-100) {
			t.Fatalf("Insert(%d) = %d, %v; want slot %d, inserted", k, s, inserted, k-100)
		}
		tab.Vals(s)[1] = float64(k)
		tab.State(s)[0] = -float64(k)
	}
	if s, inserted := tab.Insert(120); inserted || s != 20 {
		t.Fatalf("second Insert(120) = %d, %v", s, inserted)
	}
	if _, ok := tab.Lookup(99); ok {
		t.Fatal("Lookup found a key below the range")
	}
	if tab.Generation() != gen {
		t.Fatal("inserting keys of the range moved slots")
	}
	if _, inserted := tab.Insert(5); !inserted {
		t.Fatal("Insert(5) outside the range did not insert")
	}
	if tab.Dense() || tab.Generation() == gen {
		t.Fatal("a key outside the range left the table dense, or its slots unmoved")
	}
	for k := uint64(100); k < 150; k++ {
		s, ok := tab.Lookup(k)
		if !ok || tab.Vals(s)[1] != float64(k) || tab.State(s)[0] != -float64(k) {
			t.Fatalf("key %d after leaving dense: %v, %v", k, ok, tab.Vals(s))
		}
	}
	if tab.Len() != 51 {
		t.Fatalf("Len = %d, want 51", tab.Len())
	}
}

func TestUseDenseRangeInvalid(t *testing.T) {
	t.Parallel()
	full, _ := store.NewTable[float32](1, 0, 0)
	full.Insert(3)
	empty := func() *store.Table[float32] { tab, _ := store.NewTable[float32](1, 0, 0); return tab }
	for _, c := range []struct {
		name string
		tab  *store.Table[float32]
		base uint64
		n    int
	}{
		{"not empty", full, 0, 10},
		{"no keys", empty(), 0, 0},
		{"too many keys", empty(), 0, store.MaxDenseKeys + 1},
		{"overflow", empty(), math.MaxUint64 - 5, 10},
	} {
		if err := c.tab.UseDenseRange(c.base, c.n); !errors.Is(err, store.ErrInvalidConfig) {
			t.Errorf("%s: UseDenseRange(%d, %d) = %v, want ErrInvalidConfig", c.name, c.base, c.n, err)
		}
	}
	if err := empty().UseDenseRange(math.MaxUint64-9, 10); err != nil {
		t.Errorf("the last 10 keys: %v", err)
	}
}
