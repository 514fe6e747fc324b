package store

import (
	"fmt"
	"math"
	"slices"
)

// VarTable maps uint64 keys to value vectors whose length is chosen per key
// when the key is inserted, each with StateWidth state values per value. It
// is a Go map of slices: the slower, more memory-hungry path, for handlers
// that receive per-key lengths. Use Table when every key has the same
// width. Keys cannot be deleted.
//
// VarTable is not safe for concurrent use.
type VarTable[V Number] struct {
	sw     int
	maxLen int
	// m holds, per key, the values followed by their state:
	// n*(1+sw) values for a key of length n.
	m map[uint64][]V
}

// NewVarTable returns an empty VarTable with stateWidth state values per
// value and at most maxLen values per key, a bound on what a peer's request
// can make Insert allocate.
func NewVarTable[V Number](stateWidth, maxLen int) (*VarTable[V], error) {
	if stateWidth < 0 || stateWidth > MaxStateWidth {
		return nil, fmt.Errorf("%w: state width = %d, want 0..%d", ErrInvalidConfig, stateWidth, MaxStateWidth)
	}
	if limit := math.MaxInt / 8 / (1 + stateWidth); maxLen < 1 || maxLen > limit {
		return nil, fmt.Errorf("%w: max length = %d, want 1..%d", ErrInvalidConfig, maxLen, limit)
	}
	return &VarTable[V]{sw: stateWidth, maxLen: maxLen, m: make(map[uint64][]V)}, nil
}

// StateWidth returns the number of state values per value.
func (t *VarTable[V]) StateWidth() int { return t.sw }

// Len returns the number of keys.
func (t *VarTable[V]) Len() int { return len(t.m) }

// split returns the values and state parts of a stored vector.
func (t *VarTable[V]) split(buf []V) (vals, state []V) {
	n := len(buf) / (1 + t.sw)
	vals = buf[:n:n]
	if t.sw > 0 {
		state = buf[n:]
	}
	return vals, state
}

// Lookup returns the values and state of key. The slices alias the table
// and stay valid as long as the table: VarTable never moves a key's values.
func (t *VarTable[V]) Lookup(key uint64) (vals, state []V, ok bool) {
	buf, ok := t.m[key]
	if !ok {
		return nil, nil, false
	}
	vals, state = t.split(buf)
	return vals, state, true
}

// Insert returns the values and state of key, adding the key with n zero
// values and n*StateWidth() zero state values if it is absent; inserted
// reports whether it was added. It returns an error wrapping ErrLength if
// the key is present with a length other than n, and one wrapping
// ErrInvalidConfig if n is outside [0, maxLen].
func (t *VarTable[V]) Insert(key uint64, n int) (vals, state []V, inserted bool, err error) {
	if buf, ok := t.m[key]; ok {
		vals, state = t.split(buf)
		if len(vals) != n {
			return nil, nil, false, fmt.Errorf("%w: key %d has %d values, got %d", ErrLength, key, len(vals), n)
		}
		return vals, state, false, nil
	}
	if n < 0 || n > t.maxLen {
		return nil, nil, false, fmt.Errorf("%w: key %d length %d, want 0..%d", ErrInvalidConfig, key, n, t.maxLen)
	}
	buf := make([]V, n*(1+t.sw))
	t.m[key] = buf
	vals, state = t.split(buf)
	return vals, state, true, nil
}

// Range calls fn for each key with its values and state (aliasing the
// table), in unspecified order, until fn returns false. fn may modify vals
// and state but must not insert keys.
func (t *VarTable[V]) Range(fn func(key uint64, vals, state []V) bool) {
	for k, buf := range t.m {
		vals, state := t.split(buf)
		if !fn(k, vals, state) {
			return
		}
	}
}

// SortedKeys returns the keys in ascending order, in a new slice.
func (t *VarTable[V]) SortedKeys() []uint64 {
	out := make([]uint64, 0, len(t.m))
	for k := range t.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
