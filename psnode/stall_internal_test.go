package psnode

import (
	"slices"
	"testing"
	"time"
)

// TestSSPBlockers: a bounded-delay table's server blames, for the oldest
// pull it holds, the workers behind it that have not pushed since the
// pull came: not one that is ahead, idle, dead, or behind but pushing
// (slow, not stalled).
func TestSSPBlockers(t *testing.T) {
	h, err := NewSSPHandler[float32](&StoreHandler[float32]{}, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	const ahead, hung, idle, dead = 9, 11, 13, 15
	h.tickLocked(ahead, 0, 5, false)
	h.tickLocked(hung, 0, 1, false)
	h.tickLocked(idle, 0, 0, true)
	h.tickLocked(dead, 0, 0, false)
	h.dead[dead] = true
	h.clocks[hung].ticked = time.Now().Add(-time.Minute)
	if since, ids := h.blockers([]int32{ahead, hung, idle}); len(ids) != 0 {
		t.Errorf("no pull held: blockers %v since %v, want none", ids, since)
	}
	h.waiting.hold(&KVRequest[float32]{KVMeta: KVMeta{Sender: ahead}}, sspAt{epoch: 0, step: 6})
	since, ids := h.blockers([]int32{ahead, hung, idle})
	if !slices.Equal(ids, []int32{hung}) || time.Since(since) > time.Minute/2 {
		t.Errorf("pull at step 6 held: blockers %v since %v, want [%d] since the pull came", ids, since, hung)
	}
	// A worker not heard from at all holds it back too.
	if _, ids := h.blockers([]int32{ahead, hung, idle, 17}); !slices.Equal(ids, []int32{hung, 17}) {
		t.Errorf("with a worker not heard from: blockers %v, want [%d 17]", ids, hung)
	}
	// Behind, but pushing: slow, not stalled.
	h.tickLocked(hung, 0, 2, false)
	if _, ids := h.blockers([]int32{ahead, hung, idle}); len(ids) != 0 {
		t.Errorf("the slow worker pushed after the pull came: blockers %v, want none", ids)
	}
}
