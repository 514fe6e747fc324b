package psnode

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

func TestFramesRoundTrip(t *testing.T) {
	zeros := make([]byte, 4096)
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919 + i*i*31)
	}
	for name, b := range map[string][]byte{"empty": nil, "short": []byte("abc"), "zeros": zeros, "mixed": random} {
		enc, err := appendFrame(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 && len(enc) > len(b)+1 {
			t.Errorf("%s: %d bytes framed into %d: more than the codec byte added", name, len(b), len(enc))
		}
		got, err := decodeFrame(enc)
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: decoded %d bytes (%v), want %d", name, len(got), err, len(b))
		}
	}
	for _, keys := range [][]uint64{nil, {7}, {1, 2, 3, 1 << 40, math.MaxUint64}, {5, 3, 9}, {4, 4}} {
		for _, store := range []bool{false, true} {
			got, err := parseKeys(appendKeys(nil, keys, store))
			if err != nil || !slices.Equal(got.keys, keys) || got.store != store || got.ref {
				t.Errorf("keys %v, store %v: parsed %+v, %v", keys, store, got, err)
			}
		}
	}
}

func TestDecompressRefuses(t *testing.T) {
	for name, m := range map[string]*transport.Message{
		"unknown filter":    {Meta: transport.Meta{Filters: filterCompress | 1<<9}},
		"unknown codec":     {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{9, 1, 2}}},
		"oversized frame":   {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameZstd, 0xff, 0xff, 0xff, 0xff, 0x0f}}},
		"keys cut short":    {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameStored, keysDelta, 3, 1, 1}}},
		"keys repeat":       {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameStored, keysDelta, 2, 5, 0}}},
		"keys over the cap": {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameStored, keysRaw, 0xff, 0xff, 0xff, 0xff, 0x0f}}},
		"stored reference":  {Meta: transport.Meta{Filters: filterCompress | filterKeyCache}, Data: [][]byte{append([]byte{frameStored, keysRef | keysStore, 9}, make([]byte, 16)...)}},
		"short reference":   {Meta: transport.Meta{Filters: filterCompress | filterKeyCache}, Data: [][]byte{{frameStored, keysRef, 9, 1, 2}}},
		"cache without bit": {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{append([]byte{frameStored, keysRef, 9}, make([]byte, 16)...)}},
		"key cache alone":   {Meta: transport.Meta{Filters: filterKeyCache}},
	} {
		if _, err := decompressFrames(m); !errors.Is(err, transport.ErrMalformed) {
			t.Errorf("%s: %v, want an error matching ErrMalformed", name, err)
		}
	}
}

// FuzzDecompress: any frames decode without panicking, to at most
// MaxCompressedFrame bytes each; frames compressFrames wrote decode back
// to what it was given.
func FuzzDecompress(f *testing.F) {
	keys := []uint64{1, 5, 1 << 33}
	plain := &transport.Message{Data: [][]byte{asBytes(keys), bytes.Repeat([]byte{1, 2, 3, 4}, 40)}, Meta: transport.Meta{DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32}}}
	m := &transport.Message{Data: slices.Clone(plain.Data), Meta: transport.Meta{DataTypes: slices.Clone(plain.Meta.DataTypes)}}
	if err := compressFrames(m, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(m.Data[0], m.Data[1])
	f.Add([]byte{frameStored, keysRaw, 1, 1, 2, 3, 4, 5, 6, 7, 8}, []byte{frameZstd, 4, 0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		m := &transport.Message{Meta: transport.Meta{Filters: filterCompress | filterKeyCache}, Data: [][]byte{k, v}}
		kf, err := decompressFrames(m)
		if err != nil || kf.ref || kf.store {
			return // a reference or a list to keep round-trips through a cache: below only plain ones
		}
		for _, d := range m.Data {
			if len(d) > MaxCompressedFrame {
				t.Fatalf("a frame decoded to %d bytes", len(d))
			}
		}
		if len(m.Data[0])%8 != 0 {
			t.Fatalf("keys frame decoded to %d bytes", len(m.Data[0]))
		}
		// What decoded encodes and decodes to itself.
		back := &transport.Message{Data: slices.Clone(m.Data), Meta: transport.Meta{DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeChar}}}
		if err := compressFrames(back, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := decompressFrames(back); err != nil {
			t.Fatal(err)
		}
		for i := range m.Data {
			if !bytes.Equal(back.Data[i], m.Data[i]) {
				t.Fatalf("frame %d changed on the way back", i)
			}
		}
	})
}
