package psnode_test

import (
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// TestRawAppDeliversMessagesOfItsApp: a raw app's messages reach the raw
// app of the same id on the receiving node, with their frames, and Send
// reports the bytes the transport took.
func TestRawAppDeliversMessagesOfItsApp(t *testing.T) {
	c := startCluster(t, 0, 2, 90, nil)
	got := make(chan *transport.Message, 1)
	if _, err := psnode.NewRawApp(c.workers[1], 21, func(m *transport.Message) { got <- m }); err != nil {
		t.Fatal(err)
	}
	if _, err := psnode.NewRawApp(c.workers[1], 21, func(*transport.Message) {}); err == nil {
		t.Fatal("a second raw app with the same id was accepted")
	}
	a, err := psnode.NewRawApp(c.workers[0], 21, func(*transport.Message) {})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	m := &transport.Message{
		Meta: transport.Meta{Recver: c.workers[1].ID(), Head: 7, Body: []byte("hdr"), DataTypes: []transport.DataType{transport.TypeFloat32}},
		Data: [][]byte{f32bytes([]float32{1, 2})},
	}
	n, err := a.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if n < 8+len("hdr") {
		t.Errorf("Send reported %d bytes, want at least the data and body", n)
	}
	select {
	case r := <-got:
		if r.Meta.Sender != c.workers[0].ID() || r.Meta.AppID != 21 || r.Meta.Head != 7 || string(r.Meta.Body) != "hdr" || len(r.Data) != 1 || len(r.Data[0]) != 8 {
			t.Fatalf("received %s body %q", r, r.Meta.Body)
		}
	case <-ctx.Done():
		t.Fatal("the message did not arrive")
	}
	select {
	case <-a.Done():
		t.Fatal("Done closed while the node runs")
	default:
	}
	_ = c.workers[0].Close()
	<-a.Done()
}
