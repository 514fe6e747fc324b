package psnode

import "testing"

// TestKeyCachesAgree: a worker's mirror and a server's cache, fed the same
// requests, keep the same lists within the same budget, forgetting the
// least recently used first; a reference to a forgotten list misses.
func TestKeyCachesAgree(t *testing.T) {
	list := func(base uint64) []uint64 {
		out := make([]uint64, minCacheKeys)
		for i := range out {
			out[i] = base + uint64(i)
		}
		return out
	}
	budget := 2 * cacheCost(minCacheKeys) // room for two lists
	worker, server := newKeyCaches(budget), newKeyCaches(budget)
	send := func(keys []uint64) (ref, resolved bool) {
		frame, ref := worker.encode(1, keys)
		f, err := parseKeys(frame)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := server.resolve(9, f)
		if ok && len(got) != len(keys) {
			t.Fatalf("resolved %d keys, sent %d", len(got), len(keys))
		}
		return ref, ok
	}
	a, b, c := list(100), list(200), list(300)
	for i, step := range []struct {
		keys     []uint64
		wantRef  bool
		resolved bool
	}{
		{a, false, true}, {a, true, true}, // kept, then referred to
		{b, false, true}, {a, true, true}, // a is now the most recent
		{c, false, true}, // b is forgotten on both sides
		{b, false, true}, // so it is sent again; a goes
		{c, true, true},
	} {
		ref, ok := send(step.keys)
		if ref != step.wantRef || ok != step.resolved {
			t.Fatalf("step %d: reference %v resolved %v, want %v %v", i, ref, ok, step.wantRef, step.resolved)
		}
	}
	short := []uint64{1, 2, 3}
	if frame, ref := worker.encode(1, short); ref || frame[0]&keysStore != 0 {
		t.Errorf("a list of %d keys asked to be kept or referred to", len(short))
	}
	// A server that lost its lists misses.
	frame, ref := worker.encode(1, c)
	f, _ := parseKeys(frame)
	if _, ok := newKeyCaches(budget).resolve(9, f); !ref || ok {
		t.Errorf("a fresh server resolved a reference (ref %v, ok %v)", ref, ok)
	}
}
