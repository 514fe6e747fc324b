package partition_test

import (
	"errors"
	"math"
	mrand "math/rand"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"

	"github.com/spindle-ps/spindle/psnode/partition"
)

const maxU = math.MaxUint64

func TestNewRangeRanges(t *testing.T) {
	t.Parallel()
	third := uint64(6148914691236517205) // (2^64-1)/3; 2^64 = 3*third + 1
	tests := []struct {
		name    string
		parts   int
		maxKey  uint64
		want    []partition.Range
		wantErr error
	}{
		{name: "parts=1/full", parts: 1, maxKey: 0, want: []partition.Range{{0, maxU}}},
		{name: "parts=1/maxKey=1", parts: 1, maxKey: 1, want: []partition.Range{{0, 0}}},
		{name: "parts=1/maxKey=10", parts: 1, maxKey: 10, want: []partition.Range{{0, 9}}},
		{name: "maxKey=parts", parts: 3, maxKey: 3, want: []partition.Range{{0, 0}, {1, 1}, {2, 2}}},
		{name: "divisible", parts: 2, maxKey: 10, want: []partition.Range{{0, 4}, {5, 9}}},
		{name: "remainder=1", parts: 3, maxKey: 10, want: []partition.Range{{0, 3}, {4, 6}, {7, 9}}},
		{name: "remainder=2", parts: 3, maxKey: 11, want: []partition.Range{{0, 3}, {4, 7}, {8, 10}}},
		{name: "full/parts=2", parts: 2, maxKey: 0, want: []partition.Range{{0, 1<<63 - 1}, {1 << 63, maxU}}},
		{name: "full/parts=3", parts: 3, maxKey: 0, want: []partition.Range{
			{0, third}, {third + 1, 2 * third}, {2*third + 1, maxU},
		}},
		{name: "full/parts=4", parts: 4, maxKey: 0, want: []partition.Range{
			{0, 1<<62 - 1}, {1 << 62, 1<<63 - 1}, {1 << 63, 3<<62 - 1}, {3 << 62, maxU},
		}},
		{name: "maxKey=MaxUint64", parts: 2, maxKey: maxU, want: []partition.Range{{0, 1<<63 - 1}, {1 << 63, maxU - 1}}},
		{name: "parts=0", parts: 0, maxKey: 10, wantErr: partition.ErrInvalidParts},
		{name: "parts=-1", parts: -1, maxKey: 0, wantErr: partition.ErrInvalidParts},
		{name: "parts>MaxParts", parts: partition.MaxParts + 1, maxKey: 0, wantErr: partition.ErrInvalidParts},
		{name: "parts>maxKey", parts: 4, maxKey: 3, wantErr: partition.ErrInvalidParts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := partition.NewRange(tt.parts, tt.maxKey)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("NewRange(%d, %d) error = %v, want %v", tt.parts, tt.maxKey, err, tt.wantErr)
				}
				if _, herr := partition.NewHash(tt.parts, tt.maxKey); !errors.Is(herr, tt.wantErr) {
					t.Fatalf("NewHash(%d, %d) error = %v, want %v", tt.parts, tt.maxKey, herr, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewRange(%d, %d): %v", tt.parts, tt.maxKey, err)
			}
			if got := p.Ranges(); !slices.Equal(got, tt.want) {
				t.Fatalf("Ranges() = %v, want %v", got, tt.want)
			}
			checkRanges(t, p)
		})
	}
}

// checkRanges checks that p's ranges tile the key space with sizes differing
// by at most one, and that Owner agrees with them at each range's edges.
func checkRanges(t *testing.T, p *partition.RangePartitioner) {
	t.Helper()
	rs := p.Ranges()
	if len(rs) != p.NumParts() {
		t.Fatalf("len(Ranges()) = %d, want %d", len(rs), p.NumParts())
	}
	last := p.MaxKey() - 1 // wraps to MaxUint64 for the full space
	if rs[0].Begin != 0 || rs[len(rs)-1].Last != last {
		t.Fatalf("ranges %v do not span [0, %d]", rs, last)
	}
	minSize, maxSize := uint64(maxU), uint64(0)
	for i, r := range rs {
		if r.Last < r.Begin {
			t.Fatalf("range %d = %v is empty", i, r)
		}
		if i > 0 && r.Begin != rs[i-1].Last+1 {
			t.Fatalf("range %d = %v does not follow %v", i, r, rs[i-1])
		}
		size := r.Last - r.Begin // size-1, so that 2^64 keys do not overflow
		minSize, maxSize = min(minSize, size), max(maxSize, size)
		for _, k := range []uint64{r.Begin, r.Last, r.Begin + (r.Last-r.Begin)/2} {
			if got, err := p.Owner(k); err != nil || got != i {
				t.Fatalf("Owner(%d) = %d, %v; want %d (range %v)", k, got, err, i, r)
			}
			if !r.Contains(k) {
				t.Fatalf("%v.Contains(%d) = false", r, k)
			}
		}
	}
	if maxSize-minSize > 1 {
		t.Fatalf("range sizes differ by %d (> 1): %v", maxSize-minSize, rs)
	}
}

func TestRangeTilesSpace(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		parts := 1 + rng.IntN(64)
		var maxKey uint64
		switch rng.IntN(3) {
		case 0: // full space
		case 1:
			maxKey = uint64(parts) + rng.Uint64N(1000)
		default:
			maxKey = max(uint64(parts), rng.Uint64())
		}
		p, err := partition.NewRange(parts, maxKey)
		if err != nil {
			t.Fatalf("NewRange(%d, %d): %v", parts, maxKey, err)
		}
		checkRanges(t, p)
	}
}

func TestOwnerOutOfSpace(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{partition.KindRange, partition.KindHash, partition.KindConsistent} {
		t.Run("kind="+kind, func(t *testing.T) {
			t.Parallel()
			p, err := partition.New(kind, 3, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []uint64{10, 11, maxU} {
				_, err := p.Owner(k)
				var ke *partition.KeyError
				if !errors.Is(err, partition.ErrOutOfSpace) || !errors.As(err, &ke) || ke.Key != k || ke.Pos != -1 {
					t.Fatalf("Owner(%d) error = %v, want *KeyError wrapping ErrOutOfSpace", k, err)
				}
			}
			full, err := partition.New(kind, 3, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []uint64{0, 1, maxU - 1, maxU} {
				if o, err := full.Owner(k); err != nil || o < 0 || o >= 3 {
					t.Fatalf("full space Owner(%d) = %d, %v", k, o, err)
				}
			}
		})
	}
}

func TestNewUnknownKind(t *testing.T) {
	t.Parallel()
	if _, err := partition.New("modulo", 2, 0); !errors.Is(err, partition.ErrUnknownKind) {
		t.Fatalf("New(modulo) error = %v, want ErrUnknownKind", err)
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		parts   int
		maxKey  uint64
		keys    []uint64
		want    [][]uint64 // keys per part, range kind only (nil: skip)
		wantErr error
		wantPos int
	}{
		{name: "empty", parts: 3, maxKey: 10, keys: nil, want: [][]uint64{nil, nil, nil}},
		{name: "empty/non-nil", parts: 2, maxKey: 0, keys: []uint64{}, want: [][]uint64{nil, nil}},
		{name: "parts=1", parts: 1, maxKey: 0, keys: []uint64{0, 5, maxU}, want: [][]uint64{{0, 5, maxU}}},
		{name: "maxKey=parts", parts: 4, maxKey: 4, keys: []uint64{0, 1, 3}, want: [][]uint64{{0}, {1}, nil, {3}}},
		{name: "not divisible", parts: 3, maxKey: 10, keys: []uint64{0, 3, 4, 6, 7, 9},
			want: [][]uint64{{0, 3}, {4, 6}, {7, 9}}},
		{name: "full space edges", parts: 2, maxKey: 0, keys: []uint64{0, 1<<63 - 1, 1 << 63, maxU},
			want: [][]uint64{{0, 1<<63 - 1}, {1 << 63, maxU}}},
		{name: "full space/only MaxUint64", parts: 3, maxKey: 0, keys: []uint64{maxU}, want: [][]uint64{nil, nil, {maxU}}},
		{name: "full space/only 0", parts: 3, maxKey: 0, keys: []uint64{0}, want: [][]uint64{{0}, nil, nil}},
		{name: "unsorted", parts: 2, maxKey: 0, keys: []uint64{1, 5, 3, 7}, wantErr: partition.ErrNotAscending, wantPos: 2},
		{name: "duplicate", parts: 2, maxKey: 0, keys: []uint64{1, 5, 5, 7}, wantErr: partition.ErrNotAscending, wantPos: 2},
		{name: "duplicate MaxUint64", parts: 2, maxKey: 0, keys: []uint64{maxU, maxU}, wantErr: partition.ErrNotAscending, wantPos: 1},
		{name: "out of space", parts: 2, maxKey: 10, keys: []uint64{1, 9, 10}, wantErr: partition.ErrOutOfSpace, wantPos: 2},
		{name: "out of space first", parts: 2, maxKey: 10, keys: []uint64{maxU, 1}, wantErr: partition.ErrOutOfSpace, wantPos: 0},
		{name: "unsorted before out of space", parts: 2, maxKey: 10, keys: []uint64{3, 2, 11}, wantErr: partition.ErrNotAscending, wantPos: 1},
	}
	for _, tt := range tests {
		for _, kind := range []string{partition.KindRange, partition.KindHash, partition.KindConsistent} {
			t.Run(tt.name+"/kind="+kind, func(t *testing.T) {
				t.Parallel()
				p, err := partition.New(kind, tt.parts, tt.maxKey)
				if err != nil {
					t.Fatal(err)
				}
				out := make([]partition.Segment, 1, 8) // reused capacity
				segs, err := p.Split(tt.keys, out)
				if tt.wantErr != nil {
					var ke *partition.KeyError
					if !errors.Is(err, tt.wantErr) || !errors.As(err, &ke) || ke.Pos != tt.wantPos || ke.Key != tt.keys[tt.wantPos] {
						t.Fatalf("Split(%v) error = %v, want %v at position %d", tt.keys, err, tt.wantErr, tt.wantPos)
					}
					if len(segs) != 0 {
						t.Fatalf("Split error returned %d segments, want 0", len(segs))
					}
					return
				}
				if err != nil {
					t.Fatalf("Split(%v): %v", tt.keys, err)
				}
				checkSplit(t, p, tt.keys, segs)
				if kind == partition.KindRange && !slices.EqualFunc(gather(tt.keys, segs), tt.want, slices.Equal) {
					t.Fatalf("Split(%v) = %v, want %v", tt.keys, gather(tt.keys, segs), tt.want)
				}
			})
		}
	}
}

// gather returns the keys of each segment.
func gather(keys []uint64, segs []partition.Segment) [][]uint64 {
	got := make([][]uint64, len(segs))
	for i, s := range segs {
		if s.Idx == nil {
			if s.Hi > s.Lo {
				got[i] = keys[s.Lo:s.Hi]
			}
			continue
		}
		for _, j := range s.Idx {
			got[i] = append(got[i], keys[j])
		}
	}
	return got
}

// naiveSplit assigns each key to its Owner, or reports the first invalid
// position with the sentinel that Split must return.
func naiveSplit(p partition.Partitioner, maxKey uint64, keys []uint64) (parts [][]int, badPos int, badErr error) {
	for i, k := range keys {
		if maxKey != 0 && k >= maxKey {
			return nil, i, partition.ErrOutOfSpace
		}
		if i > 0 && k <= keys[i-1] {
			return nil, i, partition.ErrNotAscending
		}
	}
	parts = make([][]int, p.NumParts())
	for i, k := range keys {
		o, err := p.Owner(k)
		if err != nil {
			return nil, i, err
		}
		parts[o] = append(parts[o], i)
	}
	return parts, -1, nil
}

// maxKeyOf returns the key space bound of p.
func maxKeyOf(p partition.Partitioner) uint64 {
	switch p := p.(type) {
	case *partition.RangePartitioner:
		return p.MaxKey()
	case *partition.HashPartitioner:
		return p.MaxKey()
	}
	panic("unknown partitioner type")
}

// checkSplit checks a successful Split result against the per-key Owner:
// every key appears exactly once, in order, in the segment of its owner,
// and range segments are contiguous and inside their range.
func checkSplit(t testing.TB, p partition.Partitioner, keys []uint64, segs []partition.Segment) {
	t.Helper()
	if len(segs) != p.NumParts() {
		t.Fatalf("Split returned %d segments, want %d", len(segs), p.NumParts())
	}
	want, pos, err := naiveSplit(p, maxKeyOf(p), keys)
	if err != nil {
		t.Fatalf("Split succeeded on invalid input: naive check finds %v at position %d", err, pos)
	}
	rs := p.Ranges()
	next := 0 // expected Lo of the next contiguous segment
	for i, s := range segs {
		var got []int
		if s.Idx == nil {
			if p.Kind() == partition.KindRange && s.Lo != next {
				t.Fatalf("segment %d starts at %d, want %d", i, s.Lo, next)
			}
			if s.Lo < 0 || s.Hi < s.Lo || s.Hi > len(keys) {
				t.Fatalf("segment %d = [%d, %d) outside batch of %d", i, s.Lo, s.Hi, len(keys))
			}
			for j := s.Lo; j < s.Hi; j++ {
				got = append(got, j)
			}
			next = s.Hi
		} else {
			if p.Kind() == partition.KindRange {
				t.Fatalf("range segment %d has an index list", i)
			}
			for _, j := range s.Idx {
				got = append(got, int(j))
			}
		}
		if !slices.Equal(got, want[i]) {
			t.Fatalf("segment %d positions = %v, want %v", i, got, want[i])
		}
		if s.Len() != len(want[i]) {
			t.Fatalf("segment %d Len() = %d, want %d", i, s.Len(), len(want[i]))
		}
		for _, j := range got {
			if rs != nil && !rs[i].Contains(keys[j]) {
				t.Fatalf("segment %d holds key %d outside its range %v", i, keys[j], rs[i])
			}
		}
	}
	if p.Kind() == partition.KindRange && next != len(keys) {
		t.Fatalf("range segments end at %d, want %d", next, len(keys))
	}
}

// quickInput is a random partitioner configuration and key batch for
// testing/quick; keys are sorted and deduplicated, except when Raw is set.
type quickInput struct {
	Hash       bool
	Consistent bool // with Hash: the consistent kind
	Parts      uint8
	MaxKey     uint64
	Small      bool // bound maxKey and keys to a small space, so parts collide
	Raw        bool // keep the batch unsorted
	Keys       []uint64
}

func TestSplitMatchesNaiveQuick(t *testing.T) {
	t.Parallel()
	// Count outcomes, to check that the generator reaches each of them.
	outcomes := map[string]int{}
	prop := func(in quickInput) bool {
		parts := int(in.Parts%32) + 1
		maxKey := in.MaxKey
		keys := slices.Clone(in.Keys)
		if in.Small {
			maxKey = uint64(parts) + maxKey%200
			for i := range keys {
				keys[i] %= maxKey + 2 // a few keys fall out of space
			}
		} else if in.MaxKey%4 == 0 {
			maxKey = 0 // full space, often
		}
		if !in.Raw {
			slices.Sort(keys)
			keys = slices.Compact(keys)
		}
		kind := partition.KindRange
		if in.Hash {
			kind = partition.KindHash
			if in.Consistent {
				kind = partition.KindConsistent
			}
		}
		p, err := partition.New(kind, parts, maxKey)
		if err != nil {
			t.Logf("New(%s, %d, %d): %v", kind, parts, maxKey, err)
			return false
		}
		segs, err := p.Split(keys, nil)
		_, badPos, badErr := naiveSplit(p, maxKey, keys)
		if badErr != nil {
			outcomes[badErr.Error()]++
			var ke *partition.KeyError
			if !errors.Is(err, badErr) || !errors.As(err, &ke) || ke.Pos != badPos {
				t.Logf("Split error = %v, want %v at %d", err, badErr, badPos)
				return false
			}
			return true
		}
		outcomes[kind]++
		if err != nil {
			t.Logf("Split(%v): %v", keys, err)
			return false
		}
		checkSplit(t, p, keys, segs)
		return true
	}
	cfg := &quick.Config{MaxCount: 2000, Rand: newQuickRand()}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{partition.KindRange, partition.KindHash, partition.KindConsistent, partition.ErrNotAscending.Error(), partition.ErrOutOfSpace.Error()} {
		if outcomes[o] == 0 {
			t.Errorf("no generated case had outcome %q (outcomes %v)", o, outcomes)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestSplitReusesOut is not parallel: testing.AllocsPerRun forbids it.
func TestSplitReusesOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := sortedKeys(rng, 10000, 0)
	for _, kind := range []string{partition.KindRange, partition.KindHash, partition.KindConsistent} {
		t.Run("kind="+kind, func(t *testing.T) {
			p, err := partition.New(kind, 4, 0)
			if err != nil {
				t.Fatal(err)
			}
			segs, err := p.Split(keys, nil)
			if err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(20, func() {
				segs, err = p.Split(keys, segs)
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Fatalf("Split with reused out: %v allocs, want 0", allocs)
			}
			checkSplit(t, p, keys, segs)
			// An error keeps the capacity for the next call.
			bad, err := p.Split([]uint64{2, 1}, segs)
			if err == nil || len(bad) != 0 || cap(bad) < 4 {
				t.Fatalf("Split(unsorted) = len %d cap %d, %v", len(bad), cap(bad), err)
			}
		})
	}
}

func TestHashBalance(t *testing.T) {
	t.Parallel()
	const parts, n = 8, 80000
	keys := clustered(n)
	for _, kind := range []string{partition.KindHash, partition.KindConsistent} {
		p, err := partition.New(kind, parts, 0)
		if err != nil {
			t.Fatal(err)
		}
		segs, err := p.Split(keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range segs {
			if got := s.Len(); got < n/parts*9/10 || got > n/parts*11/10 {
				t.Errorf("%s: part %d holds %d keys, want about %d", kind, i, got, n/parts)
			}
		}
	}
}

// clustered returns the keys 0..n-1.
func clustered(n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	return keys
}

// TestConsistentMovesOnlyTheNewPartsKeys: going from S parts to S+1, the
// consistent partitioner moves only keys that the new part S takes, about
// 1/(S+1) of them (jump consistent hashing's expectation), and going
// back moves those same keys back; the hash partitioner moves most keys.
func TestConsistentMovesOnlyTheNewPartsKeys(t *testing.T) {
	t.Parallel()
	const n = 100000
	keys := clustered(n)
	owners := func(kind string, parts int) []int {
		p, err := partition.New(kind, parts, 0)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int, n)
		for i, k := range keys {
			if out[i], err = p.Owner(k); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for s := 1; s <= 8; s++ {
		before, after := owners(partition.KindConsistent, s), owners(partition.KindConsistent, s+1)
		moved := 0
		for i := range keys {
			if before[i] == after[i] {
				continue
			}
			moved++
			if after[i] != s {
				t.Fatalf("%d→%d parts: key %d moved from part %d to part %d, not to the new part", s, s+1, keys[i], before[i], after[i])
			}
		}
		share, want := float64(moved)/n, 1/float64(s+1)
		if share < want*0.95 || share > want*1.05 {
			t.Errorf("%d→%d parts: %.4f of the keys moved, want about %.4f", s, s+1, share, want)
		}
		hb, ha := owners(partition.KindHash, s), owners(partition.KindHash, s+1)
		hashMoved := 0
		for i := range keys {
			if hb[i] != ha[i] {
				hashMoved++
			}
		}
		t.Logf("%d→%d parts: consistent moves %.4f of the keys (expectation %.4f), hash %.4f", s, s+1, share, want, float64(hashMoved)/n)
	}
}

// TestJumpIsPinned: Jump(Mix(key), parts) is the consistent partitioner's
// wire contract; these values must never change.
func TestJumpIsPinned(t *testing.T) {
	for _, tt := range []struct {
		h       uint64
		buckets int
		want    int
	}{
		{0, 1, 0}, {0, 10, 0}, {1, 10, 6}, {partition.Mix(12345), 4, 1}, {^uint64(0), 1000, 313},
	} {
		if got := partition.Jump(tt.h, tt.buckets); got != tt.want {
			t.Errorf("Jump(%d, %d) = %d, want %d", tt.h, tt.buckets, got, tt.want)
		}
	}
}

// sortedKeys returns n distinct ascending random keys below maxKey (the whole
// space when maxKey is 0).
func sortedKeys(rng *rand.Rand, n int, maxKey uint64) []uint64 {
	seen := make(map[uint64]struct{}, n)
	keys := make([]uint64, 0, n)
	for len(keys) < n {
		k := rng.Uint64()
		if maxKey != 0 {
			k %= maxKey
		}
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// newQuickRand returns the seeded generator testing/quick takes (a math/rand
// generator, not a math/rand/v2 one).
func newQuickRand() *mrand.Rand { return mrand.New(mrand.NewSource(42)) }

// TestSplitLongListErrors checks the first offence is reported in lists
// long enough to be checked in parallel parts: at a part's first key, in a
// later part than another offence, and out of the key space.
func TestSplitLongListErrors(t *testing.T) {
	const n = 5 << 20
	const maxKey = 4 * n
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(2 * i)
	}
	tests := []struct {
		name   string
		maxKey uint64
		brk    map[int]uint64 // position → key
		pos    int
		want   error
	}{
		{name: "none", maxKey: maxKey},
		{name: "last key", maxKey: maxKey, brk: map[int]uint64{n - 1: 0}, pos: n - 1, want: partition.ErrNotAscending},
		{name: "each part's first", maxKey: maxKey, brk: map[int]uint64{n / 2: 0, n / 4: 0, 3 * n / 4: 0, n / 8: 0}, pos: n / 8, want: partition.ErrNotAscending},
		{name: "repeated at the middle", maxKey: 0, brk: map[int]uint64{n / 2: uint64(2 * (n/2 - 1))}, pos: n / 2, want: partition.ErrNotAscending},
		{name: "out of space", maxKey: n, brk: map[int]uint64{3 * n / 4: 3 * n / 2}, pos: n / 2, want: partition.ErrOutOfSpace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := slices.Clone(keys)
			for i, k := range tt.brk {
				ks[i] = k
			}
			p, err := partition.New(partition.KindRange, 3, tt.maxKey)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Split(ks, nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Split: %v", err)
				}
				return
			}
			var ke *partition.KeyError
			if !errors.Is(err, tt.want) || !errors.As(err, &ke) || ke.Pos != tt.pos {
				t.Fatalf("Split error = %v, want %v at %d", err, tt.want, tt.pos)
			}
		})
	}
}
