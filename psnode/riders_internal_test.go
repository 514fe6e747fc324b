package psnode

import (
	"errors"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// TestRidersBounds: answers wait only while a request is in the handler,
// at most transport.MaxAcks for one customer, and go when the queue runs
// empty, when the customer's next request has been handled, or
// maxAckServes requests later.
func TestRidersBounds(t *testing.T) {
	var r riders
	worker, other := ackKey{9, 0, 2}, ackKey{11, 0, 0}
	req := func(ts int32) *KVMeta { return &KVMeta{Sender: 9, AppID: 0, CustomerID: 2, Timestamp: ts, Push: true} }
	if r.hold(req(1)) {
		t.Fatal("an answer given outside the handler waited")
	}
	r.begin(worker)
	for ts := range int32(transport.MaxAcks) {
		if !r.hold(req(ts)) {
			t.Fatalf("answer %d did not wait", ts)
		}
	}
	if r.hold(req(transport.MaxAcks)) {
		t.Fatalf("answer %d waited: at most %d may", transport.MaxAcks, transport.MaxAcks)
	}
	m := &transport.Message{Meta: transport.Meta{Recver: 9, AppID: 0, CustomerID: 2, Timestamp: transport.MaxAcks}}
	r.take(m)
	if len(m.Meta.Acks) != transport.MaxAcks || m.Meta.Acks[0] != 0 || m.Meta.Acks[transport.MaxAcks-1] != transport.MaxAcks-1 {
		t.Fatalf("the message took %d answers, want the %d waiting in order", len(m.Meta.Acks), transport.MaxAcks)
	}
	if out := r.end(true); len(out) != 0 {
		t.Fatalf("%d messages for answers already taken", len(out))
	}

	// The worker's next request: what waited before it goes after it.
	r.begin(worker)
	r.hold(req(1))
	if out := r.end(false); len(out) != 0 {
		t.Fatal("an answer went at the end of its own request, with more queued")
	}
	r.begin(worker) // a pull held back: no message to ride on
	if out := r.end(false); len(out) != 1 || out[0].Meta.Timestamp != 1 || len(out[0].Meta.Acks) != 0 {
		t.Fatalf("after the worker's next request: %v, want the answer to 1 alone", out)
	}

	// Other customers' requests: one customer's answers go together,
	// after maxAckServes requests.
	r.begin(other)
	r.hold(req(1))
	r.hold(&KVMeta{Sender: 10, Timestamp: 5, Push: true})
	for i := 1; i < maxAckServes; i++ {
		if out := r.end(false); len(out) != 0 {
			t.Fatalf("answers went after %d requests with more queued, want them to wait %d", i, maxAckServes)
		}
		r.begin(other)
		r.hold(req(int32(1 + i)))
	}
	out := r.end(false)
	if len(out) != 2 {
		t.Fatalf("%d messages after %d requests, want one for each of the 2 customers", len(out), maxAckServes)
	}
	for _, m := range out {
		got := append([]int32{m.Meta.Timestamp}, m.Meta.Acks...)
		want := []int32{5}
		if m.Meta.Recver == 9 {
			want = []int32{1, 2, 3, 4, 5, 6, 7, 8}
		}
		if !slices.Equal(got, want) || !m.Meta.Push || m.Meta.Request {
			t.Fatalf("answer to %d answers %v (push %v), want %v", m.Meta.Recver, got, m.Meta.Push, want)
		}
	}
}

// TestAckOfAPullFails: an answer riding on another message is empty, so
// a peer that acknowledges that way a request waiting for values fails
// it rather than leaving it without them.
func TestAckOfAPullFails(t *testing.T) {
	c := &customer{pending: map[int32]*request{}, failed: map[int32]error{}}
	onReply := func(int32, *transport.Message) error { return nil }
	pull := &request{waiting: map[int32]bool{9: true}, done: make(chan struct{}), onReply: onReply}
	push := &request{waiting: map[int32]bool{9: true}, done: make(chan struct{})}
	c.pending[1], c.pending[2] = pull, push
	c.reply(&transport.Message{Meta: transport.Meta{Sender: 9, Timestamp: 2, Push: true, Acks: []int32{1, 77}}})
	for ts, r := range map[int32]*request{1: pull, 2: push} {
		select {
		case <-r.done:
		default:
			t.Fatalf("request %d not completed", ts)
		}
	}
	if !errors.Is(pull.err, transport.ErrMalformed) {
		t.Fatalf("pull acknowledged without values: err %v, want ErrMalformed", pull.err)
	}
	if push.err != nil {
		t.Fatalf("push: %v", push.err)
	}
}
