package psnode

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergeSumMatchesHashSum: for sorted parts, the merge adds up the
// same values in the same order as the general path, bit for bit.
func TestMergeSumMatchesHashSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		dim := 1 + rng.IntN(3)
		parts := make([]KVPairs[float32], 1+rng.IntN(4))
		for i := range parts {
			seen := map[uint64]bool{}
			for range rng.IntN(50) {
				k := rng.Uint64N(80)
				if !seen[k] {
					seen[k] = true
					parts[i].Keys = append(parts[i].Keys, k)
				}
			}
			slices.Sort(parts[i].Keys)
			for range len(parts[i].Keys) * dim {
				parts[i].Vals = append(parts[i].Vals, rng.Float32()*2-1)
			}
		}
		m, h := mergeSum(parts, dim), hashSum(parts, dim)
		if !slices.Equal(m.Keys, h.Keys) || !slices.Equal(m.Vals, h.Vals) {
			t.Fatalf("trial %d: merge %v %v, hash %v %v", trial, m.Keys, m.Vals, h.Keys, h.Vals)
		}
	}
	if isStrictlySorted([]uint64{1, 1}) || isStrictlySorted([]uint64{2, 1}) || !isStrictlySorted([]uint64{1, 2}) {
		t.Fatal("isStrictlySorted")
	}
}
