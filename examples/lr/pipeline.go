package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/feed"
)

// A worker's steps run in a feed.Pipeline, in every mode. With --prefetch
// (the default) the pulls of the next mini-batches are out
// while one computes and pushes, and pushes are not waited for one by
// one; without it each step pulls, computes and pushes in turn, waiting
// for each. PullBatch and PushBatch do what the table's consistency asks.
// In synchronous mode a batch's pull and push carry its step
// (PullStep, PushStep): the servers answer the pull once the step before
// is applied with every worker's part, so the prefetched weights are
// exactly those a worker that waited would read, and the model stays
// bit-identical. In bounded-delay mode they carry its clock, its place in
// the epoch (feed.Batch's Epoch and Step); when the feed has no shard for
// the worker, the pipeline's IdleHook finishes the batches in hand, waits
// for every push and tells the servers the worker holds no one back.

// slot is ps-lr's state of one batch in the pipeline.
type slot struct {
	ex   []lr.Example
	keys []uint64
	w    []float32
	pull int32
}

// newPipeline returns the worker's pipeline.
func (w *worker) newPipeline() *feed.Pipeline[slot] {
	return &feed.Pipeline[slot]{Depth: w.f.Depth(), Start: w.start, Finish: w.finish}
}

// start works out a batch's keys and sends the pull of their weights.
func (w *worker) start(ctx context.Context, s *feed.Slot[slot]) error {
	m := &s.Model
	m.ex = toExamples(m.ex, s.Batch.Examples)
	var err error
	if m.keys, err = lr.BatchKeys(m.ex, m.keys); err != nil {
		return err
	}
	if m.pull, err = w.t.PullBatch(ctx, s.Batch.Epoch, s.Batch.Step, m.keys, &m.w); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

// finish waits for a batch's weights, computes its gradients and sends
// the push.
func (w *worker) finish(ctx context.Context, s *feed.Slot[slot]) ([]feed.Pending, error) {
	m := &s.Model
	if err := w.wait(ctx, func() (int32, error) { return m.pull, nil }); err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	w.grad = slices.Grow(w.grad[:0], len(m.keys))[:len(m.keys)]
	loss, err := lr.Gradient(m.ex, m.keys, m.w, w.grad)
	if err != nil {
		return nil, err
	}
	w.counts.LossSum += loss
	w.counts.Examples += int64(len(m.ex))
	ts, err := w.t.PushBatch(ctx, s.Batch.Epoch, s.Batch.Step, m.keys, w.grad)
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	return []feed.Pending{func(ctx context.Context) error {
		if err := w.wait(ctx, func() (int32, error) { return ts, nil }); err != nil {
			return fmt.Errorf("push: %w", err)
		}
		return nil
	}}, nil
}
