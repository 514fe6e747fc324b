package transport_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// FuzzDecodeMeta checks that DecodeMeta never panics, that every error
// wraps ErrMalformed, and that whatever decodes re-encodes to a meta that
// decodes to the same value and the same bytes (the encoding of a value
// is canonical). The seed corpus is in testdata/fuzz/FuzzDecodeMeta.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []transport.Meta{{}, dataMeta(), controlMeta()} {
		b, err := transport.AppendMeta(nil, &m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := transport.DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		enc, err := transport.AppendMeta(nil, &m)
		if err != nil {
			t.Fatalf("re-encoding a decoded meta: %v", err)
		}
		m2, err := transport.DecodeMeta(enc)
		if err != nil {
			t.Fatalf("decoding a re-encoded meta %x: %v", enc, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("decode(encode(decode(b))) differs:\n got %+v\nwant %+v", m2, m)
		}
		enc2, err := transport.AppendMeta(nil, &m2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not canonical: %x then %x", enc, enc2)
		}
	})
}

// FuzzRoundTrip builds a Meta from the fuzzer's arguments and checks
// Decode(Encode(m)) == m.
func FuzzRoundTrip(f *testing.F) {
	f.Add(int32(9), int32(8), int32(0), int32(0), int32(3), uint8(3), int32(0), []byte(nil), int32(0), int32(0),
		uint64(0), []byte{8, 9}, int32(0), []byte(nil), int32(0), uint64(0), []byte(nil), int64(0), "")
	f.Add(int32(1), int32(4), int32(1), int32(2), int32(1), uint8(1), int32(7), []byte("body"), int32(-1), int32(2),
		uint64(1<<63), []byte(nil), int32(2), []byte{2, 1, 0, 0xff, 0, 8, 1, 0}, int32(7), uint64(5), []byte("auth"), int64(-3), "10.0.0.1")
	f.Fuzz(func(t *testing.T, sender, recver, appID, custID, ts int32, flags uint8, head int32, body []byte,
		prio, status int32, sig uint64, types []byte, cmd int32, nodes []byte, group int32, csig uint64,
		auth []byte, nonce int64, reason string) {
		m := transport.Meta{
			Sender: sender, Recver: recver, AppID: appID, CustomerID: custID, Timestamp: ts,
			Request: flags&1 != 0, Push: flags&2 != 0, Pull: flags&4 != 0, SimpleApp: flags&8 != 0,
			Head: head, Body: nonEmpty(body), Priority: prio, Status: status, MsgSig: sig,
			Filters: prio ^ status<<7, // derived: the corpus keeps its arguments
			Control: transport.Control{
				Cmd: transport.Command(cmd), BarrierGroup: group, MsgSig: csig,
				Auth: nonEmpty(auth), Nonce: nonce, Reason: reason,
			},
		}
		for _, b := range types {
			m.DataTypes = append(m.DataTypes, transport.DataType(int8(b)))
			if flags&16 != 0 {
				m.Acks = append(m.Acks, int32(b)*7919-ts) // derived, as Filters
			}
		}
		// Four bytes per node: role, id, port, rank; host and incarnation
		// are derived from the other arguments.
		for i := 0; i+4 <= len(nodes); i += 4 {
			c := nodes[i : i+4]
			m.Control.Nodes = append(m.Control.Nodes, transport.Node{
				Role: transport.Role(int8(c[0])), ID: int32(int8(c[1])) * 1000003, Port: int32(c[2]) << 8,
				Rank: int32(int8(c[3])), IsRecovery: c[0]&1 != 0,
				Host: reason[:min(len(reason), i)], Incarnation: nonce * int64(i+1),
			})
		}
		enc, err := transport.AppendMeta(nil, &m)
		if err != nil {
			if len(m.DataTypes) > transport.MaxDataFrames {
				return
			}
			t.Fatalf("AppendMeta: %v", err)
		}
		got, err := transport.DecodeMeta(enc)
		if err != nil {
			t.Fatalf("DecodeMeta(%x): %v", enc, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip changed the meta:\n got %+v\nwant %+v", got, m)
		}
	})
}

// nonEmpty maps an empty slice to nil: the codec does not distinguish
// them (TestMetaEmptySlices).
func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
