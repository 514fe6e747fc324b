package psnode

import (
	"sync"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// A server's answers to pushes are empty: they only say that the push is
// applied. While the server is handling a request, such an answer waits
// to ride on the next message the server sends to the same worker (in
// Meta.Acks): a worker sends a push and then the pull of a later
// mini-batch, and under load both are answered in one message, one
// message fewer a mini-batch and server. An answer waits at most until
// the worker's next request has been handled (a pull held back by its
// consistency model does not make the push's answer wait with it), the
// server's queue of requests runs empty, maxAckServes requests later, or
// transport.MaxAcks answers wait for the worker; then it goes on its
// own, with the other answers waiting for the same worker.

// maxAckServes bounds how many requests an answer to a push waits for a
// message to ride on.
const maxAckServes = 8

// ackKey names the customer of a worker that answers go to.
type ackKey struct{ peer, app, cust int32 }

// waitingAcks are the timestamps of one customer's pushes whose answers
// wait, and the server's count of requests when the first began to wait.
type waitingAcks struct {
	ts    []int32
	since int
}

// riders holds a server's waiting answers.
type riders struct {
	mu      sync.Mutex
	serving bool   // a request is in the handler
	served  int    // requests handed to the handler
	current ackKey // the customer whose request is, or was last, in the handler
	waiting map[ackKey]*waitingAcks
}

// begin notes that a request of customer k goes to the handler.
func (r *riders) begin(k ackKey) {
	r.mu.Lock()
	r.serving = true
	r.served++
	r.current = k
	r.mu.Unlock()
}

// hold keeps the answer to push request req to ride on a later message,
// and reports whether it did: only while a request is in the handler,
// and while fewer than transport.MaxAcks answers wait for its customer.
func (r *riders) hold(req *KVMeta) bool {
	k := ackKey{req.Sender, req.AppID, req.CustomerID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.serving {
		return false
	}
	w := r.waiting[k]
	if w == nil {
		if r.waiting == nil {
			r.waiting = make(map[ackKey]*waitingAcks)
		}
		w = &waitingAcks{since: r.served}
		r.waiting[k] = w
	}
	if len(w.ts) >= transport.MaxAcks {
		return false // goes now, and takes the waiting ones with it
	}
	w.ts = append(w.ts, req.Timestamp)
	return true
}

// take removes the answers waiting for m's receiver and puts them on m.
func (r *riders) take(m *transport.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := ackKey{m.Meta.Recver, m.Meta.AppID, m.Meta.CustomerID}
	if w := r.waiting[k]; w != nil {
		m.Meta.Acks = append(m.Meta.Acks, w.ts...)
		delete(r.waiting, k)
	}
}

// end notes that the handler returned, and returns the answers that may
// wait no more, one message a customer: all of them when no request is
// queued (idle); else those of the customer whose request it was, given
// while an earlier request was in the handler, and those of a customer
// whose first waiting answer was given maxAckServes requests ago, that
// one included.
func (r *riders) end(idle bool) []*transport.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serving = false
	var out []*transport.Message
	for k, w := range r.waiting {
		again := k == r.current && w.since < r.served
		if !idle && !again && r.served-w.since+1 < maxAckServes {
			continue
		}
		delete(r.waiting, k) // never empty: hold adds one as it makes it
		out = append(out, &transport.Message{Meta: transport.Meta{
			Recver: k.peer, AppID: k.app, CustomerID: k.cust,
			Push: true, Timestamp: w.ts[0], Acks: w.ts[1:],
		}})
	}
	return out
}

// endServe ends a request's turn in the handler and sends the answers to
// pushes that may wait no more.
func (s *KVServer[V]) endServe() {
	for _, m := range s.acks.end(len(s.c.queue) == 0) {
		_ = s.send(s.n.ctx, m)
	}
}
