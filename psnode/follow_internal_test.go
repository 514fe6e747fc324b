package psnode

import (
	"bytes"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
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
	for _, r := range []int32{-2, maxRejoinRound + 1, 1<<31 - 1} {
		rj := rejoinState{}
		rj.rounds[transport.AllGroups] = r
		if _, err := decodeRejoin(rj.encode()); err == nil {
			t.Errorf("round %d decoded: a scheduler raising its own to it would wrap", r)
		}
	}
	rj := rejoinState{}
	rj.rounds[1], rj.rounds[transport.AllGroups] = -1, maxRejoinRound
	if _, err := decodeRejoin(rj.encode()); err != nil {
		t.Errorf("rounds -1 and %d: %v", maxRejoinRound, err)
	}
}
