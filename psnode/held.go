package psnode

import (
	"slices"
	"time"
)

// heldPulls are the pulls a bounded-delay or synchronous handler answers
// later, each with what it waits for (at). It keeps copies, since a
// request aliases the receive buffer. Its handler's lock guards it.
type heldPulls[V Number, A any] []heldPull[V, A]

type heldPull[V Number, A any] struct {
	req   *KVRequest[V]
	at    A
	since time.Time // when it came
}

// hold keeps a copy of req until take finds it due.
func (h *heldPulls[V, A]) hold(req *KVRequest[V], at A) {
	cp := &KVRequest[V]{KVMeta: req.KVMeta, KVPairs: KVPairs[V]{Keys: slices.Clone(req.Keys), Vals: slices.Clone(req.Vals), Lens: slices.Clone(req.Lens)}}
	*h = append(*h, heldPull[V, A]{req: cp, at: at, since: time.Now()})
}

// take removes the pulls due says may be answered now and returns them;
// it also removes, without returning them, those drop (when not nil)
// says nobody waits for any more.
func (h *heldPulls[V, A]) take(due func(A) bool, drop func(*KVRequest[V]) bool) []*KVRequest[V] {
	var out []*KVRequest[V]
	keep := (*h)[:0]
	for _, p := range *h {
		switch {
		case drop != nil && drop(p.req):
		case due(p.at):
			out = append(out, p.req)
		default:
			keep = append(keep, p)
		}
	}
	clear((*h)[len(keep):])
	*h = keep
	return out
}
