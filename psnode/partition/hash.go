package partition

import "math"

// HashPartitioner assigns key k to part Mix(k) % NumParts(). It spreads
// clustered keys evenly over the parts; Split returns index lists instead of
// contiguous segments.
//
// HashPartitioner is immutable and safe for concurrent use.
type HashPartitioner struct {
	parts  int
	maxKey uint64 // 0: the whole uint64 space
}

var _ Partitioner = (*HashPartitioner)(nil)

// NewHash returns a hash partitioner over [0, maxKey), or over the whole
// uint64 space when maxKey is 0. parts must be in [1, MaxParts] and must not
// exceed the number of keys in the space; otherwise NewHash returns an error
// wrapping ErrInvalidParts.
func NewHash(parts int, maxKey uint64) (*HashPartitioner, error) {
	if err := checkParts(parts, maxKey); err != nil {
		return nil, err
	}
	return &HashPartitioner{parts: parts, maxKey: maxKey}, nil
}

// Mix is the splitmix64 finalizer, a bijection on uint64 whose output bits
// each depend on every input bit. The hash partitioner's key-to-part mapping
// is Mix(key) % parts; it is part of the wire contract and must not change.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// NumParts returns the number of parts.
func (h *HashPartitioner) NumParts() int { return h.parts }

// MaxKey returns the key space bound; 0 means the whole uint64 space.
func (h *HashPartitioner) MaxKey() uint64 { return h.maxKey }

// Kind returns KindHash.
func (h *HashPartitioner) Kind() string { return KindHash }

// Ranges returns nil: hash parts are not ranges.
func (h *HashPartitioner) Ranges() []Range { return nil }

// Owner returns Mix(key) % NumParts().
func (h *HashPartitioner) Owner(key uint64) (int, error) {
	if !inSpace(key, h.maxKey) {
		return 0, &KeyError{Pos: -1, Key: key, MaxKey: h.maxKey, Err: ErrOutOfSpace}
	}
	return int(Mix(key) % uint64(h.parts)), nil
}

// Split fills the Idx list of each part's segment with the positions of the
// part's keys, in one pass that also validates the batch. The Idx buffers of
// out are reused (truncated and appended to); when one is too small for the
// expected share it is replaced by one of about len(keys)/NumParts() plus
// 1/8 slack. An empty segment may have a nil Idx. Batches longer than
// math.MaxInt32 are rejected with ErrBatchTooLarge.
func (h *HashPartitioner) Split(keys []uint64, out []Segment) ([]Segment, error) {
	out = resize(out, h.parts)
	n := len(keys)
	if n > math.MaxInt32 {
		return out[:0], ErrBatchTooLarge
	}
	p := uint64(h.parts)
	// Pre-size the index lists for the expected share plus 1/8 slack when
	// the share is large enough to matter; small ones grow by append.
	est := n/h.parts + n/(8*h.parts) + 1
	for i := range out {
		idx := out[i].Idx[:0]
		if est >= 16 && cap(idx) < est {
			idx = make([]int32, 0, est)
		}
		out[i] = Segment{Idx: idx}
	}
	var prev uint64
	for i, k := range keys {
		if !inSpace(k, h.maxKey) {
			return out[:0], outOfSpace(keys, i, h.maxKey)
		}
		if i > 0 && k <= prev {
			return out[:0], notAscending(keys, i)
		}
		prev = k
		part := Mix(k) % p
		out[part].Idx = append(out[part].Idx, int32(i))
	}
	return out, nil
}
