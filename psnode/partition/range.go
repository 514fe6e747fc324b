package partition

import (
	"math"
	"math/bits"
)

// RangePartitioner cuts the key space into NumParts contiguous ranges. With
// S keys in the space and p parts, the first S%p ranges hold S/p+1 keys and
// the others S/p keys, so sizes differ by at most one and no key is left
// without an owner.
//
// RangePartitioner is immutable and safe for concurrent use.
type RangePartitioner struct {
	parts  int
	maxKey uint64 // 0: the whole uint64 space
	// base and rem describe the range sizes: parts [0, rem) hold base+1
	// keys, parts [rem, parts) hold base keys. split = rem*(base+1) is the
	// first key of part rem. Unused when parts == 1.
	base, rem, split uint64
	// begins[i] is the first key of part i.
	begins []uint64
}

var _ Partitioner = (*RangePartitioner)(nil)

// NewRange returns a range partitioner over [0, maxKey), or over the whole
// uint64 space when maxKey is 0. parts must be in [1, MaxParts] and must not
// exceed the number of keys in the space; otherwise NewRange returns an error
// wrapping ErrInvalidParts.
func NewRange(parts int, maxKey uint64) (*RangePartitioner, error) {
	if err := checkParts(parts, maxKey); err != nil {
		return nil, err
	}
	p := uint64(parts)
	r := &RangePartitioner{parts: parts, maxKey: maxKey, begins: make([]uint64, parts)}
	if parts == 1 {
		return r, nil
	}
	if maxKey == 0 {
		// The space holds 2^64 keys: divide the 128-bit value 1<<64.
		// hi (1) < p, so the quotient fits in 64 bits.
		r.base, r.rem = bits.Div64(1, 0, p)
	} else {
		r.base, r.rem = maxKey/p, maxKey%p
	}
	r.split = r.rem * (r.base + 1)
	for i := range r.begins {
		u := uint64(i)
		r.begins[i] = u*r.base + min(u, r.rem)
	}
	return r, nil
}

// NumParts returns the number of parts.
func (r *RangePartitioner) NumParts() int { return r.parts }

// MaxKey returns the key space bound; 0 means the whole uint64 space.
func (r *RangePartitioner) MaxKey() uint64 { return r.maxKey }

// Kind returns KindRange.
func (r *RangePartitioner) Kind() string { return KindRange }

// Ranges returns the range of each part, in part order. The ranges are
// adjacent, do not overlap and together cover the key space.
func (r *RangePartitioner) Ranges() []Range {
	rs := make([]Range, r.parts)
	for i := range rs {
		rs[i] = r.rangeOf(i)
	}
	return rs
}

// rangeOf returns the range of part i.
func (r *RangePartitioner) rangeOf(i int) Range {
	rg := Range{Begin: r.begins[i]}
	switch {
	case i+1 < r.parts:
		rg.Last = r.begins[i+1] - 1
	case r.maxKey == 0:
		rg.Last = math.MaxUint64
	default:
		rg.Last = r.maxKey - 1
	}
	return rg
}

// Owner returns the part whose range contains key, in constant time.
func (r *RangePartitioner) Owner(key uint64) (int, error) {
	if !inSpace(key, r.maxKey) {
		return 0, &KeyError{Pos: -1, Key: key, MaxKey: r.maxKey, Err: ErrOutOfSpace}
	}
	return r.owner(key), nil
}

// owner returns the owner of a key known to be inside the space.
func (r *RangePartitioner) owner(key uint64) int {
	if r.parts == 1 {
		return 0
	}
	if key < r.split {
		return int(key / (r.base + 1))
	}
	// base >= 1 because parts never exceeds the size of the space.
	return int(r.rem + (key-r.split)/r.base)
}

// Split returns one contiguous segment (Idx nil) per part. After a linear
// validation pass it finds the boundaries by binary search, and it does not
// allocate when cap(out) >= NumParts(). Idx buffers held by out are dropped.
func (r *RangePartitioner) Split(keys []uint64, out []Segment) ([]Segment, error) {
	out = resize(out, r.parts)
	if err := validate(keys, r.maxKey); err != nil {
		return out[:0], err
	}
	n := len(keys)
	lo := 0
	for i := range out {
		hi := n
		if i+1 < r.parts && lo < n {
			hi = lowerBound(keys, lo, n, r.begins[i+1])
		}
		out[i] = Segment{Lo: lo, Hi: hi}
		lo = hi
	}
	return out, nil
}

// lowerBound returns the first position in [lo, hi) whose key is >= target,
// or hi if there is none. keys[lo:hi] must be ascending.
func lowerBound(keys []uint64, lo, hi int, target uint64) int {
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if keys[mid] < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
