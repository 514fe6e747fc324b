package zmq

import (
	"bytes"
	"errors"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// TestSplitJoin splits the frames over the bound of a message into
// pieces, none over it, and joins them back; frames under it stay whole
// and are not copied.
func TestSplitJoin(t *testing.T) {
	const max = 1000
	data := [][]byte{seq(10, 1), seq(2500, 2), seq(max, 3), seq(max+1, 4), seq(0, 5)}
	ctl, frames, err := splitData(data, max)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1+3+1+2+1 {
		t.Fatalf("%d frames, want 8", len(frames))
	}
	for _, f := range frames {
		if len(f) > max {
			t.Fatalf("a frame of %d bytes, over the bound of %d", len(f), max)
		}
	}
	split, err := decodeSplit(ctl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := joinSplit(split, frames)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(data) {
		t.Fatalf("joined %d frames, want %d", len(got), len(data))
	}
	for i := range data {
		if !bytes.Equal(got[i], data[i]) {
			t.Fatalf("frame %d joined changed", i)
		}
	}
	if &got[2][0] != &data[2][0] {
		t.Fatal("a frame not split was copied")
	}

	if ctl, same, err := splitData(data[:1], max); ctl != nil || len(same) != 1 || err != nil {
		t.Fatalf("splitData of small frames = %q, %d frames, %v; want no split frame", ctl, len(same), err)
	}
	if _, _, err := splitData([][]byte{make([]byte, (maxSplitPieces+1)*10)}, 10); !errors.Is(err, transport.ErrMalformed) {
		t.Fatalf("splitData of too many pieces: %v, want an error wrapping ErrMalformed", err)
	}

	for name, fs := range map[string][][]byte{
		"a piece missing":   append(append([][]byte{}, frames[:2]...), frames[3:]...),
		"a piece too many":  append(append(append([][]byte{}, frames[:2]...), seq(5, 9)), frames[2:]...),
		"the pieces short":  append(append([][]byte{}, frames[:3]...), frames[3][:10]),
		"no frames":         nil,
		"an empty piece":    append(append([][]byte{}, frames[:1]...), []byte{}),
		"the last one gone": frames[:6],
	} {
		if _, err := joinSplit(split, fs); !errors.Is(err, transport.ErrMalformed) {
			t.Errorf("%s: joinSplit = %v, want an error wrapping ErrMalformed", name, err)
		}
	}
}

// FuzzSplit: no split frame and no frames make decodeSplit or joinSplit
// panic; their errors wrap ErrMalformed; what joins adds up to the
// lengths the split frame names.
func FuzzSplit(f *testing.F) {
	ctl, _, err := splitData([][]byte{seq(5, 1), seq(25, 2)}, 10)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ctl, []byte{5, 10, 10, 5})
	f.Add(ctlSplit, []byte{1})
	f.Add([]byte("\x00spindle:split:\x01\x00\xff\xff\xff\xff\xff\xff\xff\xff"), []byte{3})
	f.Fuzz(func(t *testing.T, b, lens []byte) {
		split, err := decodeSplit(b)
		if err != nil {
			if !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		frames := make([][]byte, len(lens))
		for i, n := range lens {
			frames[i] = seq(int(n), byte(i))
		}
		data, err := joinSplit(split, frames)
		if err != nil {
			if !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, s := range split {
			if s.index >= len(data) || len(data[s.index]) != s.length {
				t.Fatalf("split frame %d of %d bytes joined wrong", s.index, s.length)
			}
		}
	})
}
