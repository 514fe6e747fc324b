package psnode

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/store"
)

// TestMergeSumMatchesHashSum: for sorted parts, the merge adds up the
// same values in the same order as the general path, bit for bit.
func TestMergeSumMatchesHashSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 400; trial++ {
		dim := 1 + rng.IntN(3)
		parts := make([]KVPairs[float32], 1+rng.IntN(4))
		if trial%2 == 0 {
			// Two workers' parts of one value a key: mergeTwo.
			dim, parts = 1, make([]KVPairs[float32], 2)
		}
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
				v := rng.Float32()*2 - 1
				if len(parts) > 1 && rng.IntN(10) == 0 {
					v = float32(math.Copysign(0, -1)) // summed, -0 comes out +0 either way
				}
				parts[i].Vals = append(parts[i].Vals, v)
			}
		}
		m, h := mergeSum(parts, dim), hashSum(parts, dim)
		if !slices.Equal(m.Keys, h.Keys) || !slices.EqualFunc(m.Vals, h.Vals, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatalf("trial %d: merge %v %v, hash %v %v", trial, m.Keys, m.Vals, h.Keys, h.Vals)
		}
	}
	if isStrictlySorted([]uint64{1, 1}) || isStrictlySorted([]uint64{2, 1}) || !isStrictlySorted([]uint64{1, 2}) {
		t.Fatal("isStrictlySorted")
	}
}

// TestSyncDeadWorkersEndOfEpochIsNotAnswered: a dead worker's end of the
// epoch still counts, but the answer is not sent to its id, where its
// replacement now lives; its replacement's own end is answered.
func TestSyncDeadWorkersEndOfEpochIsNotAnswered(t *testing.T) {
	st, err := NewStoreHandler[float32](store.Sum[float32]{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewSyncHandler(st, 2)
	if err != nil {
		t.Fatal(err)
	}
	done := func(id int32) *KVRequest[float32] { return &KVRequest[float32]{KVMeta: KVMeta{Push: true, Sender: id}} }
	dead, live := done(9), done(11)
	h.done[0] = map[int32]*KVRequest[float32]{9: dead}
	h.leftLocked(9)
	h.done[0][11] = live
	answers := h.completeLocked(0)
	if len(answers) != 1 || len(answers[0].reqs) != 1 || answers[0].reqs[0] != live || answers[0].err != nil || h.ended != 1 {
		t.Fatalf("answers %v, ended %d: want only the live worker's, and the epoch over", answers, h.ended)
	}
	if len(h.gone) != 0 {
		t.Errorf("%d dead requests still kept after the epoch", len(h.gone))
	}
}
