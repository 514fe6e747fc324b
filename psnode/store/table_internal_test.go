package store

import (
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
		home := int(hash(k) >> t.shift)
		total += (i-home+t.Cap())%t.Cap() + 1
	}
	return float64(total) / float64(t.used)
}

// TestProbeLengths checks that key patterns a server sees do not cluster:
// sequential keys, keys with only high bits set, and the keys one server
// owns under the hash partitioner.
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
	}{
		{name: "sequential", key: func(i uint64) (uint64, bool) { return i + 1, true }},
		{name: "high bits", key: func(i uint64) (uint64, bool) { return (i + 1) << 40, true }},
		{name: "stride 1024", key: func(i uint64) (uint64, bool) { return (i + 1) * 1024, true }},
		{name: "hash part 0 of 4", key: func(i uint64) (uint64, bool) {
			p, err := hp.Owner(i)
			return i, err == nil && p == 0 && i != 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tab, err := NewTable[float32](1, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := uint64(0); tab.Len() < n; i++ {
				if k, ok := tt.key(i); ok {
					tab.Insert(k)
				}
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
