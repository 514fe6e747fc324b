package store

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/spindle-ps/spindle/psnode/partition"
)

// meanProbe returns the mean number of slots a successful Lookup inspects.
func (t *Table[V]) meanProbe() float64 {
	total := 0
	for i, k := range t.keys[:t.Cap()] {
		if k == 0 {
			continue
		}
		home := int(t.home(k))
		total += (i-home+t.Cap())%t.Cap() + 1
	}
	return float64(total) / float64(t.used)
}

// TestProbeLengths checks that key patterns a server sees do not cluster:
// sequential keys, keys with only high bits set, the keys one server owns
// under the hash partitioner, scattered keys, and scattered keys followed
// by a crowd, in a hash table and in one that chooses its layout
// (AutoDense), which must pick the layout named.
func TestProbeLengths(t *testing.T) {
	t.Parallel()
	const n = 3 << 14 // the maximum load of a 1<<16-slot table
	hp, err := partition.NewHash(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  func(i uint64) (uint64, bool)
		auto string // the layout AutoDense picks
	}{
		{name: "sequential", key: func(i uint64) (uint64, bool) { return i + 1, true }, auto: "dense"},
		{name: "high bits", key: func(i uint64) (uint64, bool) { return (i + 1) << 40, true }, auto: "ordered"},
		{name: "stride 1024", key: func(i uint64) (uint64, bool) { return (i + 1) * 1024, true }, auto: "ordered"},
		{name: "hash part 0 of 4", key: func(i uint64) (uint64, bool) {
			p, err := hp.Owner(i)
			return i, err == nil && p == 0 && i != 0
		}, auto: "ordered"},
		{name: "scattered", key: func(i uint64) (uint64, bool) { return hash(i + 1), true }, auto: "ordered"},
		{name: "scattered, then a crowd", key: func(i uint64) (uint64, bool) {
			if i < n/2 {
				return hash(i + 1), true
			}
			return 1<<62 + i, true
		}, auto: "hashed"},
	}
	for _, tt := range tests {
		for _, auto := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/auto=%v", tt.name, auto), func(t *testing.T) {
				t.Parallel()
				tab, err := NewTable[float32](1, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				want := "hashed"
				if auto {
					if err := tab.AutoDense(MaxDenseKeys); err != nil {
						t.Fatal(err)
					}
					want = tt.auto
				}
				for i := uint64(0); tab.Len() < n; i++ {
					if k, ok := tt.key(i); ok {
						tab.Insert(k)
					}
				}
				if got := tab.Layout(); got != want {
					t.Fatalf("layout %s, want %s", got, want)
				}
				// A hash table doubles about log2(n) times; keys that
				// crowd the order lay the table out once more, not
				// once per key.
				if most := uint64(bits.Len(n) + 4); tab.gen > most {
					t.Fatalf("laid out %d times for %d keys, want at most %d", tab.gen, n, most)
				}
				if tab.ordered && tab.moved > maxMoved(tab.used) {
					t.Fatalf("keys %d slots from their homes in all, more than the %d allowed", tab.moved, maxMoved(tab.used))
				}
				if tab.dense {
					return // no probes
				}
				// Expected for linear probing at load a: (1 + 1/(1-a))/2,
				// 2.5 at the maximum load of 0.75.
				load := float64(tab.used) / float64(tab.Cap())
				got := tab.meanProbe()
				if got > 3.5 {
					t.Fatalf("mean probe length %.2f at load %.2f, want <= 3.5", got, load)
				}
				t.Logf("mean probe length %.2f at load %.2f", got, load)
			})
		}
	}
}
