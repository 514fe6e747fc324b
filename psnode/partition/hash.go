package partition

import "math"

// HashPartitioner assigns key k to part Mix(k) % NumParts() ("hash"), or,
// made by NewConsistent, to part Jump(Mix(k), NumParts()) ("consistent").
// It spreads clustered keys evenly over the parts; Split returns index
// lists instead of contiguous segments.
//
// HashPartitioner is immutable and safe for concurrent use.
type HashPartitioner struct {
	parts  int
	maxKey uint64 // 0: the whole uint64 space
	// consistent selects Jump over the modulo.
	consistent bool
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

// NewConsistent returns a consistent-hash partitioner: key k goes to part
// Jump(Mix(k), parts). Going from parts to parts+1 moves only the keys the
// new last part takes, about 1/(parts+1) of them, and going back moves
// only those: a job whose servers grow or shrink moves the fewest keys.
// Its arguments and errors are NewHash's.
func NewConsistent(parts int, maxKey uint64) (*HashPartitioner, error) {
	h, err := NewHash(parts, maxKey)
	if err != nil {
		return nil, err
	}
	h.consistent = true
	return h, nil
}

// Jump is Lamping and Veach's jump consistent hash ("A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014): it maps h to a bucket in
// [0, buckets), and a key's bucket for buckets+1 is either its bucket for
// buckets or the new one. The consistent partitioner's key-to-part mapping
// is Jump(Mix(key), parts); it is part of the wire contract and must not
// change. buckets must be at least 1.
func Jump(h uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		h = h*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((h>>33)+1)))
	}
	return int(b)
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
func (h *HashPartitioner) Kind() string {
	if h.consistent {
		return KindConsistent
	}
	return KindHash
}

// Ranges returns nil: hash parts are not ranges.
func (h *HashPartitioner) Ranges() []Range { return nil }

// Owner returns Mix(key) % NumParts().
func (h *HashPartitioner) Owner(key uint64) (int, error) {
	if !inSpace(key, h.maxKey) {
		return 0, &KeyError{Pos: -1, Key: key, MaxKey: h.maxKey, Err: ErrOutOfSpace}
	}
	return h.part(key), nil
}

// part is key's part, the key in the space.
func (h *HashPartitioner) part(key uint64) int {
	if h.consistent {
		return Jump(Mix(key), h.parts)
	}
	return int(Mix(key) % uint64(h.parts))
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
		var part int
		if h.consistent {
			part = Jump(Mix(k), h.parts)
		} else {
			part = int(Mix(k) % p) // inline: the common kind's hot loop
		}
		out[part].Idx = append(out[part].Idx, int32(i))
	}
	return out, nil
}
