package psnode

import (
	"bytes"
	"testing"
)

func TestHandoverHeaderRoundTrip(t *testing.T) {
	for _, h := range []handoverHeader{
		{App: tableAppBase | 5, Epoch: 0, To: 1},
		{App: -1, Epoch: MaxSyncEpochs - 1, To: MaxServers},
	} {
		got, err := decodeHandoverHeader(h.encode())
		if err != nil || got != h {
			t.Errorf("%+v decoded as %+v (%v)", h, got, err)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, scaleHeaderLen-1), make([]byte, scaleHeaderLen+1),
		handoverHeader{To: 0}.encode(), handoverHeader{To: MaxServers + 1}.encode(),
		handoverHeader{Epoch: -1, To: 2}.encode(), handoverHeader{Epoch: MaxSyncEpochs, To: 2}.encode()} {
		if _, err := decodeHandoverHeader(b); err == nil {
			t.Errorf("header %x accepted", b)
		}
	}
}

// FuzzHandoverHeader: any body decodes without panicking, and a decoded
// header encodes back to the same bytes.
func FuzzHandoverHeader(f *testing.F) {
	f.Add(handoverHeader{App: 1 << 30, Epoch: 3, To: 4}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandoverHeader(b)
		if err != nil {
			return
		}
		if !bytes.Equal(h.encode(), b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, h, h.encode())
		}
	})
}
