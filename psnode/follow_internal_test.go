package psnode

import (
	"bytes"
	"testing"
)

// FuzzRejoinBody: a rejoin's body from the wire decodes without a panic,
// and what decodes encodes back to the same bytes.
func FuzzRejoinBody(f *testing.F) {
	f.Add(rejoinState{rounds: [8]int32{0, 0, 3, 0, 0, 0, 2, 5}, dead: []int32{9, 12}}.encode())
	f.Add(rejoinState{}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		rj, err := decodeRejoin(b)
		if err != nil {
			return
		}
		if !bytes.Equal(rj.encode(), b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, rj, rj.encode())
		}
	})
}

func TestRejoinBodyRefusesALyingCount(t *testing.T) {
	b := rejoinState{dead: []int32{9, 12}}.encode()
	if _, err := decodeRejoin(b[:len(b)-1]); err == nil {
		t.Error("a body one byte short decoded")
	}
	b[rejoinRoundsLen] = 0xff // the count: far more ids than bytes
	if _, err := decodeRejoin(b); err == nil {
		t.Error("a count larger than the body decoded")
	}
}
