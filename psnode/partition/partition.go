package partition

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// MaxParts is the largest number of parts a partitioner accepts. Split
// returns one segment per part, so the bound keeps a misconfigured part count
// from allocating without limit.
const MaxParts = 1 << 20

// Kind names accepted by [New] and returned by [Partitioner.Kind].
const (
	KindRange      = "range"
	KindHash       = "hash"
	KindConsistent = "consistent"
)

var (
	// ErrInvalidParts is returned by the constructors when the number of
	// parts is below 1, above MaxParts, or above the size of the key space.
	ErrInvalidParts = errors.New("partition: invalid number of parts")
	// ErrUnknownKind is returned by New for a kind other than KindRange and
	// KindHash.
	ErrUnknownKind = errors.New("partition: unknown partitioner kind")
	// ErrNotAscending is wrapped by the *KeyError that Split returns when
	// the keys of a batch are not strictly ascending (unsorted or duplicate).
	ErrNotAscending = errors.New("partition: keys not strictly ascending")
	// ErrOutOfSpace is wrapped by the *KeyError that Owner and Split return
	// for a key at or above maxKey.
	ErrOutOfSpace = errors.New("partition: key outside key space")
	// ErrBatchTooLarge is returned by HashPartitioner.Split when the batch
	// has more positions than an int32 index can address.
	ErrBatchTooLarge = errors.New("partition: batch too large")
)

// Partitioner assigns keys to parts 0..NumParts()-1.
//
// Implementations are immutable and safe for concurrent use.
type Partitioner interface {
	// NumParts returns the number of parts, at least 1.
	NumParts() int
	// Owner returns the part that owns key. It returns a *KeyError wrapping
	// ErrOutOfSpace if key is outside the key space.
	Owner(key uint64) (int, error)
	// Split assigns the keys of a strictly ascending batch to parts and
	// returns one Segment per part (len NumParts()). out is reused when it
	// has enough capacity, including the Idx slices of its segments; the
	// returned segments alias out and keys are not copied.
	//
	// If keys are not strictly ascending, or a key is outside the key space,
	// Split returns out[:0] (keeping its capacity) and a *KeyError naming the
	// first offending position. Split never panics.
	Split(keys []uint64, out []Segment) ([]Segment, error)
	// Ranges returns the key range of each part for a range partitioner, a
	// fresh slice the caller may keep, and nil for a hash partitioner.
	Ranges() []Range
	// Kind returns KindRange or KindHash.
	Kind() string
}

// Segment is one part's share of a sorted key batch.
//
// When Idx is nil, the part's keys are the contiguous positions [Lo, Hi) of
// the batch, so keys[Lo:Hi] is a zero-copy slice. Otherwise Idx lists, in
// ascending order, the positions of the part's keys in the batch, and Lo and
// Hi are zero. An empty segment may be represented either way.
type Segment struct {
	Lo, Hi int
	Idx    []int32
}

// Len returns the number of keys in the segment.
func (s Segment) Len() int {
	if s.Idx != nil {
		return len(s.Idx)
	}
	return s.Hi - s.Lo
}

// Range is the set of keys owned by one part of a [RangePartitioner]: every
// key k with Begin <= k && k <= Last. Both bounds are inclusive, so that the
// last range of the full uint64 space can end at math.MaxUint64; a Range is
// never empty.
type Range struct {
	Begin uint64
	Last  uint64 // inclusive
}

// Contains reports whether key is in r.
func (r Range) Contains(key uint64) bool {
	return r.Begin <= key && key <= r.Last
}

// String formats r as "[Begin, Last]".
func (r Range) String() string {
	return fmt.Sprintf("[%d, %d]", r.Begin, r.Last)
}

// KeyError describes the first offending key found by Owner or Split.
// It wraps ErrNotAscending or ErrOutOfSpace; test with errors.Is.
type KeyError struct {
	Pos    int    // position in the batch, or -1 for Owner
	Key    uint64 // the offending key
	Prev   uint64 // the key at Pos-1, when Err is ErrNotAscending
	MaxKey uint64 // the key space bound, when Err is ErrOutOfSpace
	Err    error
}

// Error implements error.
func (e *KeyError) Error() string {
	switch {
	case errors.Is(e.Err, ErrNotAscending):
		return fmt.Sprintf("%v: key %d at position %d follows key %d", e.Err, e.Key, e.Pos, e.Prev)
	case errors.Is(e.Err, ErrOutOfSpace) && e.Pos >= 0:
		return fmt.Sprintf("%v: key %d at position %d is not below max key %d", e.Err, e.Key, e.Pos, e.MaxKey)
	case errors.Is(e.Err, ErrOutOfSpace):
		return fmt.Sprintf("%v: key %d is not below max key %d", e.Err, e.Key, e.MaxKey)
	}
	return fmt.Sprintf("%v: key %d at position %d", e.Err, e.Key, e.Pos)
}

// Unwrap returns the sentinel error.
func (e *KeyError) Unwrap() error { return e.Err }

// New returns a partitioner of the given kind (KindRange or KindHash).
func New(kind string, parts int, maxKey uint64) (Partitioner, error) {
	switch kind {
	case KindRange:
		return NewRange(parts, maxKey)
	case KindHash:
		return NewHash(parts, maxKey)
	case KindConsistent:
		return NewConsistent(parts, maxKey)
	}
	return nil, fmt.Errorf("%w %q (want %q, %q or %q)", ErrUnknownKind, kind, KindRange, KindHash, KindConsistent)
}

// checkParts validates parts against MaxParts and the key space size.
func checkParts(parts int, maxKey uint64) error {
	if parts < 1 || parts > MaxParts {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidParts, parts, MaxParts)
	}
	if maxKey != 0 && uint64(parts) > maxKey {
		return fmt.Errorf("%w: %d parts for a key space of %d keys", ErrInvalidParts, parts, maxKey)
	}
	return nil
}

// inSpace reports whether key is inside [0, maxKey), maxKey == 0 meaning the
// whole uint64 space.
func inSpace(key, maxKey uint64) bool {
	return maxKey == 0 || key < maxKey
}

// validatePart is the least number of keys validate gives a goroutine:
// below it one pass is quicker than starting another.
const validatePart = 1 << 20

// validate checks that keys are strictly ascending and inside the key space
// and returns a *KeyError for the first offending position. It reads every
// key once; a list of millions of keys is read in parts, one goroutine per
// processor.
func validate(keys []uint64, maxKey uint64) error {
	parts := min(runtime.GOMAXPROCS(0), runtime.NumCPU(), len(keys)/validatePart, 8)
	if parts <= 1 {
		return validateSpan(keys, 0, len(keys), maxKey)
	}
	errs := make([]error, parts)
	step := (len(keys) + parts - 1) / parts
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*step, min((p+1)*step, len(keys))
		wg.Go(func() { errs[p] = validateSpan(keys, lo, hi, maxKey) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the parts are in order: this is the first offence
		}
	}
	return nil
}

// validateSpan is validate of keys[lo:hi], each key checked against the
// one before it (keys[lo-1] for the first, when there is one).
func validateSpan(keys []uint64, lo, hi int, maxKey uint64) error {
	if maxKey != 0 {
		for i := lo; i < hi; i++ {
			k := keys[i]
			if k >= maxKey {
				return outOfSpace(keys, i, maxKey)
			}
			if i > 0 && k <= keys[i-1] {
				return notAscending(keys, i)
			}
		}
		return nil
	}
	for i := max(lo, 1); i < hi; i++ {
		if keys[i] <= keys[i-1] {
			return notAscending(keys, i)
		}
	}
	return nil
}

func notAscending(keys []uint64, i int) error {
	return &KeyError{Pos: i, Key: keys[i], Prev: keys[i-1], Err: ErrNotAscending}
}

func outOfSpace(keys []uint64, i int, maxKey uint64) error {
	return &KeyError{Pos: i, Key: keys[i], MaxKey: maxKey, Err: ErrOutOfSpace}
}

// resize returns out with length parts, reusing its backing array (and the
// Idx buffers it holds) when the capacity suffices.
func resize(out []Segment, parts int) []Segment {
	if cap(out) >= parts {
		return out[:parts]
	}
	grown := make([]Segment, parts)
	copy(grown, out[:cap(out)])
	return grown
}
