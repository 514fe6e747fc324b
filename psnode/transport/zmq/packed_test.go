package zmq_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// TestPackedMessages sends small messages of several frames, an empty one
// among them, once the peer has said it reads them packed: they arrive
// intact and in order, with CURVE and without, over TCP and ipc.
func TestPackedMessages(t *testing.T) {
	job := jobCurve(t, "the job secret")
	for _, tc := range []struct {
		name string
		opts zmq.Options
	}{
		{"plain", zmq.Options{}},
		{"curve", zmq.Options{Curve: job}},
		{"curve-local", zmq.Options{Curve: job, Local: true, IPCDir: t.TempDir()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, node, _, _ := sealedPair(t, tc.opts, false)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			small := func(ts int32) *transport.Message {
				return &transport.Message{
					Meta: transport.Meta{Sender: 9, Recver: 1, Timestamp: ts, Request: true, Push: true,
						DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32, transport.TypeInt32}},
					Data: [][]byte{pattern(8*int(ts+1), 1), pattern(4*int(ts+1), 2), {}},
				}
			}
			check := func(got, want *transport.Message) {
				t.Helper()
				if got.Meta.Timestamp != want.Meta.Timestamp || len(got.Data) != len(want.Data) {
					t.Fatalf("message %d arrived where %d was sent", got.Meta.Timestamp, want.Meta.Timestamp)
				}
				for i := range want.Data {
					if !bytes.Equal(got.Data[i], want.Data[i]) {
						t.Fatalf("message %d, frame %d arrived changed", want.Meta.Timestamp, i)
					}
				}
			}
			for ts := int32(0); node.Stats().Packed == 0; ts++ {
				m := small(ts % 100)
				if _, err := node.Send(ctx, m); err != nil {
					t.Fatalf("no message went packed: %v", err)
				}
				check(recv(t, srv), m)
			}
			var sent []*transport.Message
			for ts := range int32(100) {
				m := small(ts)
				if _, err := node.Send(ctx, m); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, m)
			}
			for _, m := range sent {
				check(recv(t, srv), m)
			}
			if s := srv.Stats(); s.Malformed != 0 {
				t.Fatalf("%d messages dropped as malformed", s.Malformed)
			}
		})
	}
}
