package partition_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/spindle-ps/spindle/psnode/partition"
)

// Fuzz input layout (missing trailing bytes read as zero):
//
//	byte 0      flags: bit 0 hash kind; bit 1 keys are deltas (key[i] =
//	            key[i-1] + delta%65536, so most batches are ascending);
//	            bits 2-3 maxKey mode (0 full space, 1 raw%1024, 2 raw,
//	            3 MaxUint64-raw%1024); bit 4 first key %= maxKey
//	byte 1      parts = byte % 65 (0 exercises the constructor error)
//	bytes 2-9   raw maxKey, little-endian
//	bytes 10-   keys, 8 bytes each little-endian, at most fuzzMaxKeys
const (
	fuzzHeader  = 10
	fuzzMaxKeys = 4096
)

const (
	fuzzHash = 1 << iota
	fuzzDelta
	fuzzMaxSmall
	fuzzMaxRaw
	fuzzFirstMod
	fuzzMaxTop = fuzzMaxSmall | fuzzMaxRaw
)

// encodeFuzz builds a fuzz input in the layout decodeFuzz reads.
func encodeFuzz(flags, parts byte, maxKey uint64, keys ...uint64) []byte {
	b := make([]byte, fuzzHeader, fuzzHeader+8*len(keys))
	b[0], b[1] = flags, parts
	binary.LittleEndian.PutUint64(b[2:], maxKey)
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	return b
}

type fuzzCase struct {
	kind   string
	parts  int
	maxKey uint64
	keys   []uint64
}

func decodeFuzz(data []byte) fuzzCase {
	var hdr [fuzzHeader]byte
	copy(hdr[:], data)
	flags := hdr[0]
	c := fuzzCase{kind: partition.KindRange, parts: int(hdr[1] % 65)}
	if flags&fuzzHash != 0 {
		c.kind = partition.KindHash
		if hdr[1]&0x80 != 0 {
			c.kind = partition.KindConsistent
		}
	}
	raw := binary.LittleEndian.Uint64(hdr[2:])
	switch flags & fuzzMaxTop {
	case fuzzMaxSmall:
		c.maxKey = raw % 1024
	case fuzzMaxRaw:
		c.maxKey = raw
	case fuzzMaxTop:
		c.maxKey = math.MaxUint64 - raw%1024
	}
	rest := data[min(len(data), fuzzHeader):]
	n := min(len(rest)/8, fuzzMaxKeys)
	c.keys = make([]uint64, n)
	for i := range c.keys {
		k := binary.LittleEndian.Uint64(rest[8*i:])
		switch {
		case i == 0 && flags&fuzzFirstMod != 0 && c.maxKey != 0:
			k %= c.maxKey
		case i > 0 && flags&fuzzDelta != 0:
			k = c.keys[i-1] + k%65536 // may wrap: an unsorted batch
		}
		c.keys[i] = k
	}
	return c
}

func FuzzSplit(f *testing.F) {
	const top = math.MaxUint64
	f.Add(encodeFuzz(0, 3, 0, 0, 1, top/3, top/3+1, top-1, top))
	f.Add(encodeFuzz(fuzzHash, 3, 0, 0, 1, top/3, top/3+1, top-1, top))
	f.Add(encodeFuzz(fuzzHash, 0x80|3, 0, 0, 1, top/3, top/3+1, top-1, top)) // consistent
	f.Add(encodeFuzz(fuzzMaxSmall, 7, 10, 0, 3, 9))
	f.Add(encodeFuzz(fuzzMaxSmall|fuzzHash, 10, 10, 0, 3, 9, 10))
	f.Add(encodeFuzz(fuzzMaxTop|fuzzDelta|fuzzFirstMod, 64, 0, top-200, 1, 1, 5))
	f.Add(encodeFuzz(fuzzDelta|fuzzHash, 5, 0, 100, 0, 3))
	f.Add(encodeFuzz(0, 2, 0, 5, 4))
	f.Add(encodeFuzz(fuzzMaxSmall, 0, 10, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := decodeFuzz(data)
		p, err := partition.New(c.kind, c.parts, c.maxKey)
		if err != nil {
			if c.parts >= 1 && (c.maxKey == 0 || uint64(c.parts) <= c.maxKey) {
				t.Fatalf("New(%s, %d, %d) rejected valid config: %v", c.kind, c.parts, c.maxKey, err)
			}
			if !errors.Is(err, partition.ErrInvalidParts) {
				t.Fatalf("New(%s, %d, %d) error = %v, want ErrInvalidParts", c.kind, c.parts, c.maxKey, err)
			}
			return
		}
		if c.parts < 1 || (c.maxKey != 0 && uint64(c.parts) > c.maxKey) {
			t.Fatalf("New(%s, %d, %d) accepted invalid config", c.kind, c.parts, c.maxKey)
		}
		var segs []partition.Segment
		for range 2 { // the second call reuses the first call's segments
			segs, err = p.Split(c.keys, segs)
			_, badPos, badErr := naiveSplit(p, c.maxKey, c.keys)
			if badErr != nil {
				var ke *partition.KeyError
				if !errors.Is(err, badErr) || !errors.As(err, &ke) || ke.Pos != badPos || ke.Key != c.keys[badPos] {
					t.Fatalf("Split error = %v, want %v at position %d", err, badErr, badPos)
				}
				if len(segs) != 0 {
					t.Fatalf("Split error with %d segments", len(segs))
				}
				continue
			}
			if err != nil {
				t.Fatalf("Split rejected a valid batch: %v", err)
			}
			checkSplit(t, p, c.keys, segs)
		}
	})
}
