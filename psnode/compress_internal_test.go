package psnode

import (
	"bytes"
	"encoding/binary"
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
		for _, zstd := range []bool{true, false} {
			enc, err := appendFrame(nil, b, zstd)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 0 && len(enc) > len(b)+1 {
				t.Errorf("%s: %d bytes framed into %d: more than the codec byte added", name, len(b), len(enc))
			}
			if len(b) > 0 && !zstd && (len(enc) != len(b)+1 || enc[0] != frameStored) {
				t.Errorf("%s: %d bytes stored as %d, codec %d", name, len(b), len(enc), enc[0])
			}
			got, err := decodeFrame(enc)
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s: decoded %d bytes (%v), want %d", name, len(got), err, len(b))
			}
		}
	}
	// Without zstd the keys still go as gaps, and the message says its
	// frames are stored; it decodes back.
	keys := []uint64{3, 700, 1 << 20, 1<<20 + 5}
	vals := []float32{1, 0, 0, -2.5}
	m := &transport.Message{Data: [][]byte{asBytes(slices.Clone(keys)), asBytes(slices.Clone(vals))},
		Meta: transport.Meta{DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32}}}
	if err := compressFrames(m, nil, false); err != nil {
		t.Fatal(err)
	}
	if m.Meta.Filters != filterCompress|filterStored || m.Data[0][0] != frameStored || m.Data[0][1] != keysDelta || len(m.Data[0]) >= 8*len(keys) {
		t.Errorf("stored frames: filters %#x, keys frame % x", m.Meta.Filters, m.Data[0])
	}
	if _, err := decompressFrames(m); err != nil || !bytes.Equal(m.Data[0], asBytes(keys)) || !bytes.Equal(m.Data[1], asBytes(vals)) {
		t.Errorf("stored frames decoded to % x, % x (%v)", m.Data[0], m.Data[1], err)
	}
	for _, keys := range [][]uint64{nil, {7}, {1, 2, 3, 1 << 40, math.MaxUint64}, {0, 127, 128, 300, 16_700, 16_800, 3_000_000}, {5, 3, 9}, {4, 4}} {
		for _, store := range []bool{false, true} {
			got, err := parseKeys(appendKeys(nil, keys, store))
			if err != nil || !slices.Equal(got.keys, keys) || got.store != store || got.ref {
				t.Errorf("keys %v, store %v: parsed %+v, %v", keys, store, got, err)
			}
		}
	}
}

// TestHighlyCompressedFrame: a frame that compresses as well as a frame
// can (zeros) is within what its blocks may hold, and decodes.
func TestHighlyCompressedFrame(t *testing.T) {
	zeros := make([]byte, 32<<20)
	enc, err := appendFrame(nil, zeros, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeFrame(enc)
	if err != nil || len(got) != len(zeros) {
		t.Fatalf("%d zeros compressed to %d bytes decoded to %d (%v)", len(zeros), len(enc), len(got), err)
	}
}

func TestDecompressRefuses(t *testing.T) {
	for name, m := range map[string]*transport.Message{
		"unknown filter":    {Meta: transport.Meta{Filters: filterCompress | 1<<9}},
		"unknown codec":     {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{9, 1, 2}}},
		"oversized frame":   {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameZstd, 0xff, 0xff, 0xff, 0xff, 0x0f}}},
		"size beyond bytes": {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameZstd, 0x80, 0x80, 0x80, 0x80, 0x01, 0x28, 0xb5, 0x2f, 0xfd}}},
		"four frames":       {Meta: transport.Meta{Filters: filterCompress}, Data: [][]byte{{frameStored, keysRaw, 0}, {frameStored}, {frameStored}, {frameStored}}},
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
	if err := compressFrames(m, nil, true); err != nil {
		f.Fatal(err)
	}
	f.Add(m.Data[0], m.Data[1])
	stored := &transport.Message{Data: slices.Clone(plain.Data), Meta: transport.Meta{DataTypes: slices.Clone(plain.Meta.DataTypes)}}
	if err := compressFrames(stored, nil, false); err != nil {
		f.Fatal(err)
	}
	f.Add(stored.Data[0], stored.Data[1])
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
		if err := compressFrames(back, nil, true); err != nil {
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

// FuzzParseGaps: the fast reading of gaps agrees with the plain loop of
// binary.Uvarint on any bytes: the same keys, or an error from both.
func FuzzParseGaps(f *testing.F) {
	f.Add(appendKeys(nil, []uint64{0, 127, 128, 300, 16_700, 1 << 40, math.MaxUint64}, false)[2:], 7)
	f.Add([]byte{0x80, 0x00, 0x01}, 2)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01}, 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > len(b) {
			return // parseKeys refuses these before reading
		}
		got, err := parseGaps(b, n)
		want, ok := plainGaps(b, n)
		if (err == nil) != ok || (ok && !slices.Equal(got, want)) {
			t.Fatalf("% x, %d keys: fast %v (%v), plain %v (%v)", b, n, got, err, want, ok)
		}
	})
}

// plainGaps reads n gaps with binary.Uvarint, as parseKeys did before
// parseGaps.
func plainGaps(b []byte, n int) ([]uint64, bool) {
	keys := make([]uint64, n)
	prev := uint64(0)
	for i := range keys {
		d, k := binary.Uvarint(b)
		if k <= 0 || (i > 0 && d == 0) || d > math.MaxUint64-prev {
			return nil, false
		}
		b = b[k:]
		prev += d
		keys[i] = prev
	}
	return keys, len(b) == 0
}
