package feed

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/psnode"
)

// Pending waits for one request a pipeline's batch sent (a push).
type Pending func(ctx context.Context) error

// Slot is one mini-batch in a Pipeline: the batch, with examples the
// slot owns when the pipeline prefetches, and the model's state of it
// (keys, pulled weights, requests in flight).
type Slot[S any] struct {
	Batch  Batch
	Model  S
	keyBuf []uint64
	valBuf []float32
	recs   []records.Example
}

// Pipeline overlaps a worker's communication with its computing. Its Step
// is a Feed's step function: it starts each batch (Start: work out its
// keys, send its pulls) as it comes, and finishes it (Finish: wait for
// the pulls, compute, send the pushes) only Depth batches later, so the
// pulls of the next batches are out while one computes. Pushes are not
// waited for one by one: at most MaxPushes are in flight, and Flush waits
// for all. Batches finish in order; Start and Finish run on the caller's
// goroutine.
//
// With Depth 0 each batch is started and finished within its Step and
// every push is waited for before the next batch, as a loop without a
// pipeline would.
//
// The requests must allow it: psnode copies what it sends before Push
// returns, so a slot's buffers may be reused once its pushes are sent; a
// synchronous table's pulls must carry their step (PullStep), so that a
// pull sent early still reads the weights after the step before.
type Pipeline[S any] struct {
	// Depth is how many batches are started ahead of the one finishing.
	Depth int
	// MaxPushes bounds the pushes in flight; 0 means 8.
	MaxPushes int
	// Start sends the pulls of s.Batch.
	Start func(ctx context.Context, s *Slot[S]) error
	// Finish waits for s's pulls, computes, sends its pushes and returns
	// how to wait for them.
	Finish func(ctx context.Context, s *Slot[S]) ([]Pending, error)

	slots  []Slot[S] // Depth+1, used in turn
	next   int
	held   []*Slot[S] // started, not finished; oldest first
	pushes []Pending  // oldest first
}

// Step takes the next batch: the feed's step function.
func (p *Pipeline[S]) Step(ctx context.Context, b Batch) error {
	if p.Start == nil || p.Finish == nil {
		return errors.New("feed: pipeline without Start or Finish")
	}
	if p.slots == nil {
		p.slots = make([]Slot[S], max(p.Depth, 0)+1)
	}
	// The oldest slot: finished before the newest Depth were started.
	s := &p.slots[p.next]
	p.next = (p.next + 1) % len(p.slots)
	if p.Depth > 0 {
		s.load(b) // the feed reuses b's buffers once Step returns
	} else {
		s.Batch = b
	}
	if err := p.Start(ctx, s); err != nil {
		return err
	}
	p.held = append(p.held, s)
	if len(p.held) <= p.Depth {
		return nil
	}
	if err := p.finishOldest(ctx); err != nil {
		return err
	}
	if p.Depth > 0 {
		return nil
	}
	return p.settle(ctx, 0)
}

// Flush finishes every batch started and waits for every push: at the
// end of a run of shards, so that their updates are applied and their
// results counted.
func (p *Pipeline[S]) Flush(ctx context.Context) error {
	for len(p.held) > 0 {
		if err := p.finishOldest(ctx); err != nil {
			return err
		}
	}
	return p.settle(ctx, 0)
}

// IdleHook returns an Options.Idle for a worker whose tables are ts: it
// flushes the pipeline, then says Idle on ts (bounded-delay tables hold
// no one back; what the significance and KKT filters held goes out),
// waiting at most timeout for that.
func (p *Pipeline[S]) IdleHook(ts *psnode.Tables, timeout time.Duration) func(context.Context, int) error {
	return func(ctx context.Context, epoch int) error {
		if err := p.Flush(ctx); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return ts.Idle(ctx, epoch)
	}
}

func (p *Pipeline[S]) finishOldest(ctx context.Context) error {
	s := p.held[0]
	p.held = p.held[:copy(p.held, p.held[1:])]
	pending, err := p.Finish(ctx, s)
	p.pushes = append(p.pushes, pending...)
	if err != nil {
		return err
	}
	limit := p.MaxPushes
	if limit <= 0 {
		limit = 8
	}
	return p.settle(ctx, limit)
}

// settle waits for the oldest pushes until at most keep are in flight.
func (p *Pipeline[S]) settle(ctx context.Context, keep int) error {
	for len(p.pushes) > keep {
		wait := p.pushes[0]
		p.pushes = p.pushes[:copy(p.pushes, p.pushes[1:])]
		if err := wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// load copies b's examples into storage s owns.
func (s *Slot[S]) load(b Batch) {
	n := 0
	for i := range b.Examples {
		n += len(b.Examples[i].Keys)
	}
	s.keyBuf = slices.Grow(s.keyBuf[:0], n)
	s.valBuf = slices.Grow(s.valBuf[:0], n)
	s.recs = slices.Grow(s.recs[:0], len(b.Examples))[:len(b.Examples)]
	for i, r := range b.Examples {
		k0, v0 := len(s.keyBuf), len(s.valBuf)
		s.keyBuf = append(s.keyBuf, r.Keys...)
		s.valBuf = append(s.valBuf, r.Vals...)
		s.recs[i] = records.Example{Label: r.Label, Weight: r.Weight, Keys: s.keyBuf[k0:len(s.keyBuf):len(s.keyBuf)], Vals: s.valBuf[v0:len(s.valBuf):len(s.valBuf)]}
	}
	s.Batch = Batch{Epoch: b.Epoch, Step: b.Step, Examples: s.recs}
}
