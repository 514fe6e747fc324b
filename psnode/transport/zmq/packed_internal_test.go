package zmq

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

func TestPackUnpack(t *testing.T) {
	meta := []byte("meta")
	data := [][]byte{[]byte("keys...."), {}, bytes.Repeat([]byte{7}, 300)}
	b := pack(nil, meta, data)
	gotMeta, got, err := unpack(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotMeta, meta) || len(got) != len(data) {
		t.Fatalf("unpacked %q and %d frames", gotMeta, len(got))
	}
	for i := range data {
		if !bytes.Equal(got[i], data[i]) {
			t.Fatalf("frame %d unpacked as %q", i, got[i])
		}
	}
	// A frame appended to by its holder must not run into the next one.
	got[0] = append(got[0], 'x')
	if !bytes.Equal(got[2], data[2]) {
		t.Fatal("an append to one frame changed the next")
	}
	for _, bad := range [][]byte{
		ctlPacked,
		append(bytes.Clone(ctlPacked), 0),
		append(bytes.Clone(ctlPacked), 1, 4, 3),
		b[:len(b)-1],
		append(bytes.Clone(b), 0),
		append(append(bytes.Clone(ctlPacked), 1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	} {
		if _, _, err := unpack(bad); !errors.Is(err, transport.ErrMalformed) {
			t.Errorf("unpack(%q) = %v, want an error wrapping ErrMalformed", bad, err)
		}
	}
}

// TestPackAligns: whatever the meta's length, the first data frame starts
// a multiple of 8 bytes into the packed frame, so that a receiver reads
// keys and values in place, and the frame unpacks to what was packed.
func TestPackAligns(t *testing.T) {
	keys := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 40)
	vals := bytes.Repeat([]byte{9, 8, 7, 6}, 40)
	for _, n := range []int{0, 1, 5, 7, 8, 9, 126, 127, 128, 129, 300, 16383, 16384, 20000} {
		meta := bytes.Repeat([]byte{'m'}, n)
		for _, data := range [][][]byte{{keys, vals}, {vals}, {keys, {}, vals, keys}} {
			b := pack([]byte("old"), meta, data)[len("old"):]
			total := 0
			for _, d := range data {
				total += len(d)
			}
			if at := len(b) - total; at%8 != 0 {
				t.Errorf("meta of %d bytes, %d frames: the first data frame starts at %d", n, len(data), at)
			}
			gotMeta, got, err := unpack(b)
			if err != nil {
				t.Fatalf("meta of %d bytes: %v", n, err)
			}
			if !bytes.Equal(gotMeta, meta) || len(got) != len(data) {
				t.Fatalf("meta of %d bytes: unpacked %d bytes of meta and %d frames", n, len(gotMeta), len(got))
			}
			for i := range data {
				if !bytes.Equal(got[i], data[i]) {
					t.Fatalf("meta of %d bytes: frame %d differs", n, i)
				}
			}
		}
	}
}

// FuzzUnpack: no input makes unpack panic; an error wraps ErrMalformed;
// what unpacks packs to a message that unpacks the same.
func FuzzUnpack(f *testing.F) {
	f.Add(pack(nil, []byte("m"), [][]byte{[]byte("abc"), {}}))
	f.Add(append(bytes.Clone(ctlPacked), 2, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !bytes.HasPrefix(b, ctlPacked) {
			return
		}
		meta, data, err := unpack(b)
		if err != nil {
			if !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		meta2, data2, err := unpack(pack(nil, meta, data))
		if err != nil || !bytes.Equal(meta2, meta) || len(data2) != len(data) {
			t.Fatalf("packed again: %v", err)
		}
		for i := range data {
			if !bytes.Equal(data2[i], data[i]) {
				t.Fatalf("frame %d differs once packed again", i)
			}
		}
	})
}
