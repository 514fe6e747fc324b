package store_test

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/store"
)

func TestNewTableInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		dim, stateWidth, cap int
	}{
		{name: "dim=0", dim: 0},
		{name: "dim<0", dim: -1},
		{name: "dim>MaxDim", dim: store.MaxDim + 1},
		{name: "stateWidth<0", dim: 1, stateWidth: -1},
		{name: "stateWidth>Max", dim: 1, stateWidth: store.MaxStateWidth + 1},
		{name: "capacityHint<0", dim: 1, cap: -1},
		{name: "capacityHint huge", dim: store.MaxDim, stateWidth: store.MaxStateWidth, cap: math.MaxInt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := store.NewTable[float32](tt.dim, tt.stateWidth, tt.cap); !errors.Is(err, store.ErrInvalidConfig) {
				t.Fatalf("NewTable(%d, %d, %d) error = %v, want ErrInvalidConfig", tt.dim, tt.stateWidth, tt.cap, err)
			}
		})
	}
}

func TestTableEdgeKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys []uint64
	}{
		{name: "zero", keys: []uint64{0}},
		{name: "max", keys: []uint64{math.MaxUint64}},
		{name: "zero and max", keys: []uint64{math.MaxUint64, 0, 1, math.MaxUint64 - 1}},
		{name: "sequential", keys: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab, err := store.NewTable[float64](2, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keys {
				if _, ok := tab.Lookup(k); ok {
					t.Fatalf("Lookup(%d) before insert found it", k)
				}
				slot, inserted := tab.Insert(k)
				if !inserted {
					t.Fatalf("Insert(%d) reported an existing key", k)
				}
				if v, s := tab.Vals(slot), tab.State(slot); !allZero(v) || !allZero(s) || len(v) != 2 || len(s) != 2 {
					t.Fatalf("new key %d has vals %v state %v, want 2 zeros each", k, v, s)
				}
				tab.Vals(slot)[0], tab.Vals(slot)[1] = float64(k), -float64(k)
				tab.State(slot)[1] = 1
			}
			if tab.Len() != len(tt.keys) {
				t.Fatalf("Len() = %d, want %d", tab.Len(), len(tt.keys))
			}
			for _, k := range tt.keys {
				slot, ok := tab.Lookup(k)
				if !ok || tab.Key(slot) != k {
					t.Fatalf("Lookup(%d) = %d, %v (key %d)", k, slot, ok, tab.Key(slot))
				}
				if again, inserted := tab.Insert(k); inserted || again != slot {
					t.Fatalf("Insert(%d) again = %d, %v; want %d, false", k, again, inserted, slot)
				}
				if v := tab.Vals(slot); v[0] != float64(k) || v[1] != -float64(k) || tab.State(slot)[1] != 1 {
					t.Fatalf("key %d: vals %v state %v", k, v, tab.State(slot))
				}
			}
			want := slices.Sorted(slices.Values(tt.keys))
			if got := tab.SortedKeys(); !slices.Equal(got, want) {
				t.Fatalf("SortedKeys() = %v, want %v", got, want)
			}
		})
	}
}

func allZero[V float32 | float64](v []V) bool {
	return !slices.ContainsFunc(v, func(x V) bool { return x != 0 })
}

// TestTableMatchesMap inserts random keys, with repeats and the edge keys,
// into tables that grow many times, and compares them with a Go map.
func TestTableMatchesMap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		dim, sw    int
		hint       int
		n          int
		keySpace   uint64 // 0: full space
		seed       uint64
		checkEvery int
	}{
		{name: "dim=1/sw=0", dim: 1, sw: 0, n: 50000, keySpace: 30000, seed: 1, checkEvery: 9973},
		{name: "dim=3/sw=2", dim: 3, sw: 2, n: 20000, keySpace: 0, seed: 2, checkEvery: 4999},
		{name: "dim=8/sw=3/hint", dim: 8, sw: 3, hint: 5000, n: 20000, keySpace: 1 << 40, seed: 3, checkEvery: 7919},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab, err := store.NewTable[float32](tt.dim, tt.sw, tt.hint)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(tt.seed, 99))
			ref := make(map[uint64]float32)
			for i := range tt.n {
				var k uint64
				switch {
				case i%1000 == 0:
					k = 0
				case i%1000 == 1:
					k = math.MaxUint64
				case tt.keySpace == 0:
					k = rng.Uint64()
				default:
					k = rng.Uint64N(tt.keySpace)
				}
				slot, inserted := tab.Insert(k)
				if _, had := ref[k]; had == inserted {
					t.Fatalf("Insert(%d) inserted = %v, but key present = %v", k, inserted, had)
				}
				if inserted {
					ref[k] = float32(i)
					fill(tab.Vals(slot), tab.State(slot), float32(i))
				}
				if i%tt.checkEvery == 0 {
					checkTable(t, tab, ref)
				}
			}
			checkTable(t, tab, ref)
			for range 1000 { // absent keys
				k := rng.Uint64()
				if _, present := ref[k]; present {
					continue
				}
				if slot, ok := tab.Lookup(k); ok {
					t.Fatalf("Lookup(%d) of an absent key = %d, true", k, slot)
				}
			}
		})
	}
}

// fill sets the values and state of a key inserted at step v to values
// derived from v, so that misplaced data is detected.
func fill(vals, state []float32, v float32) {
	for j := range vals {
		vals[j] = v + float32(j)
	}
	for j := range state {
		state[j] = -v - float32(j)
	}
}

func checkTable(t *testing.T, tab *store.Table[float32], ref map[uint64]float32) {
	t.Helper()
	if tab.Len() != len(ref) {
		t.Fatalf("Len() = %d, want %d", tab.Len(), len(ref))
	}
	wantVals := make([]float32, tab.Dim())
	wantState := make([]float32, tab.Dim()*tab.StateWidth())
	for k, v := range ref {
		slot, ok := tab.Lookup(k)
		if !ok {
			t.Fatalf("Lookup(%d) missing", k)
		}
		fill(wantVals, wantState, v)
		if !slices.Equal(tab.Vals(slot), wantVals) || !slices.Equal(tab.State(slot), wantState) {
			t.Fatalf("key %d: vals %v state %v, want %v %v", k, tab.Vals(slot), tab.State(slot), wantVals, wantState)
		}
	}
	seen := make(map[uint64]bool, len(ref))
	tab.Range(func(k uint64, vals, state []float32) bool {
		if seen[k] {
			t.Fatalf("Range visited %d twice", k)
		}
		seen[k] = true
		fill(wantVals, wantState, ref[k])
		if !slices.Equal(vals, wantVals) || !slices.Equal(state, wantState) {
			t.Fatalf("Range key %d: vals %v state %v", k, vals, state)
		}
		return true
	})
	if len(seen) != len(ref) {
		t.Fatalf("Range visited %d keys, want %d", len(seen), len(ref))
	}
	if got, want := tab.SortedKeys(), slices.Sorted(maps.Keys(ref)); !slices.Equal(got, want) {
		t.Fatalf("SortedKeys() differs from the reference (%d vs %d keys)", len(got), len(want))
	}
}

func TestTableGrowthPreservesData(t *testing.T) {
	t.Parallel()
	tab, err := store.NewTable[float64](4, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	startCap := tab.Cap()
	ref := make(map[uint64]float32)
	for i := range 10000 {
		k := uint64(i) * 0x9E3779B97F4A7C15 // spread, includes 0
		slot, _ := tab.Insert(k)
		for j := range tab.Vals(slot) {
			tab.Vals(slot)[j] = float64(i)*10 + float64(j)
		}
		for j := range tab.State(slot) {
			tab.State(slot)[j] = -float64(i)*10 - float64(j)
		}
		ref[k] = float32(i)
	}
	if tab.Cap() <= startCap {
		t.Fatalf("Cap() = %d, did not grow from %d", tab.Cap(), startCap)
	}
	for k, i := range ref {
		slot, ok := tab.Lookup(k)
		if !ok {
			t.Fatalf("key %d lost", k)
		}
		for j, v := range tab.Vals(slot) {
			if v != float64(i)*10+float64(j) {
				t.Fatalf("key %d vals %v", k, tab.Vals(slot))
			}
		}
		for j, v := range tab.State(slot) {
			if v != -float64(i)*10-float64(j) {
				t.Fatalf("key %d state %v", k, tab.State(slot))
			}
		}
	}
}

func TestTableReserveKeepsSlots(t *testing.T) {
	t.Parallel()
	tab, err := store.NewTable[float32](1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint64(10) {
		tab.Insert(k)
	}
	const n = 1000
	if err := tab.Reserve(n); err != nil {
		t.Fatal(err)
	}
	c := tab.Cap()
	slots := make(map[uint64]int, n)
	for i := range n {
		k := uint64(i)*7919 + 3
		slot, _ := tab.Insert(k)
		slots[k] = slot
	}
	if tab.Cap() != c {
		t.Fatalf("Cap() changed from %d to %d after Reserve(%d)", c, tab.Cap(), n)
	}
	for k, slot := range slots {
		if tab.Key(slot) != k {
			t.Fatalf("slot %d holds key %d, want %d", slot, tab.Key(slot), k)
		}
	}
	if err := tab.Reserve(-1); !errors.Is(err, store.ErrInvalidConfig) {
		t.Fatalf("Reserve(-1) error = %v", err)
	}
	if err := tab.Reserve(math.MaxInt); !errors.Is(err, store.ErrInvalidConfig) {
		t.Fatalf("Reserve(MaxInt) error = %v", err)
	}
}

func TestTableCapacityHint(t *testing.T) {
	t.Parallel()
	const n = 10000
	tab, err := store.NewTable[float32](1, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	c := tab.Cap()
	for k := range uint64(n) {
		tab.Insert(k + 1)
	}
	tab.Insert(0) // key 0 has its own slot
	if tab.Cap() != c {
		t.Fatalf("Cap() grew from %d to %d within the hint", c, tab.Cap())
	}
	if got, want := tab.MemoryBytes(), (c+1)*(8+4); got != want {
		t.Fatalf("MemoryBytes() = %d, want %d", got, want)
	}
	if tab.StateBytes() != 0 {
		t.Fatalf("StateBytes() = %d without state", tab.StateBytes())
	}
}

func TestTableInitAndRangeStop(t *testing.T) {
	t.Parallel()
	tab, err := store.NewTable[float32](2, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	tab.SetInit(func(key uint64, vals, state []float32) {
		vals[0], vals[1], state[0] = float32(key), 1, 2
	})
	for k := range uint64(100) {
		tab.Insert(k)
	}
	slot, _ := tab.Lookup(42)
	if v, s := tab.Vals(slot), tab.State(slot); v[0] != 42 || v[1] != 1 || s[0] != 2 || s[1] != 0 {
		t.Fatalf("init: vals %v state %v", v, s)
	}
	if got := tab.StateBytes(); got != (tab.Cap()+1)*2*4 {
		t.Fatalf("StateBytes() = %d", got)
	}
	visits := 0
	tab.Range(func(uint64, []float32, []float32) bool {
		visits++
		return visits < 5
	})
	if visits != 5 {
		t.Fatalf("Range visited %d keys after stop, want 5", visits)
	}
}

func TestVarTable(t *testing.T) {
	t.Parallel()
	tab, err := store.NewVarTable[float32](2, 16)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		key       uint64
		n         int
		wantNew   bool
		wantError error
	}{
		{name: "new len=3", key: 7, n: 3, wantNew: true},
		{name: "zero key", key: 0, n: 1, wantNew: true},
		{name: "max key len=0", key: math.MaxUint64, n: 0, wantNew: true},
		{name: "existing", key: 7, n: 3},
		{name: "length mismatch", key: 7, n: 4, wantError: store.ErrLength},
		{name: "too long", key: 8, n: 17, wantError: store.ErrInvalidConfig},
		{name: "negative", key: 9, n: -1, wantError: store.ErrInvalidConfig},
	}
	for _, tt := range tests { // sequential: the cases share the table
		t.Run(tt.name, func(t *testing.T) {
			vals, state, inserted, err := tab.Insert(tt.key, tt.n)
			if tt.wantError != nil {
				if !errors.Is(err, tt.wantError) {
					t.Fatalf("Insert(%d, %d) error = %v, want %v", tt.key, tt.n, err, tt.wantError)
				}
				return
			}
			if err != nil || inserted != tt.wantNew || len(vals) != tt.n || len(state) != 2*tt.n {
				t.Fatalf("Insert(%d, %d) = len %d, len %d, %v, %v", tt.key, tt.n, len(vals), len(state), inserted, err)
			}
			if inserted && len(vals) > 0 {
				vals[0], state[len(state)-1] = 5, 6
			}
			v, s, ok := tab.Lookup(tt.key)
			if !ok || len(v) != tt.n || (tt.n > 0 && (v[0] != 5 || s[len(s)-1] != 6)) {
				t.Fatalf("Lookup(%d) = %v, %v, %v", tt.key, v, s, ok)
			}
		})
	}
	if got, want := tab.SortedKeys(), []uint64{0, 7, math.MaxUint64}; !slices.Equal(got, want) || tab.Len() != 3 {
		t.Fatalf("SortedKeys() = %v (Len %d), want %v", got, tab.Len(), want)
	}
	n := 0
	tab.Range(func(uint64, []float32, []float32) bool { n++; return true })
	if n != 3 {
		t.Fatalf("Range visited %d keys, want 3", n)
	}
	if _, _, ok := tab.Lookup(8); ok {
		t.Fatal("Lookup(8) found a key whose insert failed")
	}
	if _, err := store.NewVarTable[float32](-1, 4); !errors.Is(err, store.ErrInvalidConfig) {
		t.Fatalf("NewVarTable(-1, 4) error = %v", err)
	}
	if _, err := store.NewVarTable[float32](0, 0); !errors.Is(err, store.ErrInvalidConfig) {
		t.Fatalf("NewVarTable(0, 0) error = %v", err)
	}
}
