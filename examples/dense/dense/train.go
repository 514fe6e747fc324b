package dense

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// The modes of training.
const (
	// ModePlain all-reduces the gradient; every rank updates every
	// parameter and holds the whole optimizer state.
	ModePlain = "plain"
	// ModeZeRO reduce-scatters the gradient; each rank updates its shard
	// of the parameters with its shard of the optimizer state, then the
	// parameters are all-gathered.
	ModeZeRO = "zero"
)

// Comm is what training needs of the ranks' collectives. Every rank calls
// the same methods in the same order with the same lengths. Local is the
// Comm of a single process.
type Comm interface {
	Rank() int
	Size() int
	// Shard is the range [lo, hi) of n elements rank owns.
	Shard(n, rank int) (lo, hi int)
	AllReduceSum(ctx context.Context, buf []int64) error
	ReduceScatterSum(ctx context.Context, buf []int64) error
	AllGather(ctx context.Context, buf []float64) error
	// ReduceSum leaves the sum in rank 0's buf.
	ReduceSum(ctx context.Context, buf []float64) error
	// Broadcast copies rank 0's buf to every rank's.
	Broadcast(ctx context.Context, buf []int64) error
}

// Local is the Comm of one process: every collective is the identity.
type Local struct{}

func (Local) Rank() int { return 0 }
func (Local) Size() int { return 1 }
func (Local) Shard(n, rank int) (int, int) {
	if rank != 0 {
		return n, n
	}
	return 0, n
}
func (Local) AllReduceSum(context.Context, []int64) error     { return nil }
func (Local) ReduceScatterSum(context.Context, []int64) error { return nil }
func (Local) AllGather(context.Context, []float64) error      { return nil }
func (Local) ReduceSum(context.Context, []float64) error      { return nil }
func (Local) Broadcast(context.Context, []int64) error        { return nil }

// Config are the training settings; every rank must have the same.
type Config struct {
	// Mode is ModePlain or ModeZeRO.
	Mode string
	// Batch is the global batch: examples per step over all ranks,
	// 1..MaxBatch.
	Batch int
	// Seed fixes the initial parameters and each epoch's order.
	Seed uint64
	Adam Adam
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.Mode != ModePlain && c.Mode != ModeZeRO {
		errs = append(errs, fmt.Errorf("mode %q: want %s or %s", c.Mode, ModePlain, ModeZeRO))
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		errs = append(errs, fmt.Errorf("batch %d: want 1..%d", c.Batch, MaxBatch))
	}
	if !(c.Adam.LR > 0) || !(c.Adam.Eps > 0) || !(c.Adam.Beta1 >= 0 && c.Adam.Beta1 < 1) || !(c.Adam.Beta2 >= 0 && c.Adam.Beta2 < 1) {
		errs = append(errs, fmt.Errorf("adam %+v: want lr, eps > 0 and betas in [0, 1)", c.Adam))
	}
	return errors.Join(errs...)
}

// Trainer trains a Model on its rank's part of every global batch. It is
// not safe for concurrent use.
type Trainer struct {
	cfg  Config
	comm Comm
	data *Data
	// Model holds the parameters, whole on every rank.
	Model Model
	// Steps counts the Adam steps taken.
	Steps int

	lo, hi int       // the parameters whose optimizer state this rank holds
	m, v   []float64 // Adam's moments of [lo, hi)
	sum    []int64   // the gradient sum, GradScale fixed point
	grad   []float64 // the mean gradient of [lo, hi)
	p      []float64
}

// NewTrainer returns a trainer of a model of k classes over data, its
// parameters drawn from cfg.Seed (the same on every rank).
func NewTrainer(cfg Config, comm Comm, data *Data, k int) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("dense: %w", err)
	}
	if data.D < 1 || data.Len() == 0 {
		return nil, errors.New("dense: no training examples")
	}
	if k < 2 || k > MaxClasses {
		return nil, fmt.Errorf("dense: %d classes, want 2..%d", k, MaxClasses)
	}
	t := &Trainer{cfg: cfg, comm: comm, data: data, Model: NewModel(data.D, k)}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x696e6974))
	for i := range t.Model.W {
		t.Model.W[i] = 0.01 * r.NormFloat64()
	}
	n := len(t.Model.W)
	t.lo, t.hi = 0, n
	if cfg.Mode == ModeZeRO {
		t.lo, t.hi = comm.Shard(n, comm.Rank())
	}
	t.m = make([]float64, t.hi-t.lo)
	t.v = make([]float64, t.hi-t.lo)
	t.grad = make([]float64, t.hi-t.lo)
	t.sum = make([]int64, n)
	t.p = make([]float64, k)
	return t, nil
}

// OptimizerBytes is the size of the optimizer state this rank holds.
func (t *Trainer) OptimizerBytes() int64 { return int64(len(t.m)+len(t.v)) * 8 }

// OptimizerShard is the range of parameters whose state this rank holds.
func (t *Trainer) OptimizerShard() (lo, hi int) { return t.lo, t.hi }

// EpochStats is what an epoch did, over every rank.
type EpochStats struct {
	Examples int64
	// Loss is the mean training loss and Accuracy the fraction predicted
	// right, each example taken with the parameters before its step.
	Loss, Accuracy float64
}

// Order returns the order in which epoch visits the n examples.
func Order(n int, seed uint64, epoch int) []int {
	return rand.New(rand.NewPCG(seed, uint64(epoch))).Perm(n)
}

// Epoch trains one epoch.
func (t *Trainer) Epoch(ctx context.Context, epoch int) (EpochStats, error) {
	order := Order(t.data.Len(), t.cfg.Seed, epoch)
	var loss float64
	var correct, seen int64
	for start := 0; start < len(order); start += t.cfg.Batch {
		batch := order[start:min(start+t.cfg.Batch, len(order))]
		lo, hi := t.comm.Shard(len(batch), t.comm.Rank())
		clear(t.sum)
		l, c := t.Model.AddGrad(t.data, batch[lo:hi], t.sum, t.p)
		loss, correct, seen = loss+l, correct+int64(c), seen+int64(hi-lo)
		if err := t.step(ctx, len(batch)); err != nil {
			return EpochStats{}, fmt.Errorf("epoch %d step %d: %w", epoch, t.Steps, err)
		}
	}
	tot := []int64{quantize(loss), correct, seen}
	if err := t.comm.AllReduceSum(ctx, tot); err != nil {
		return EpochStats{}, fmt.Errorf("epoch %d: metrics: %w", epoch, err)
	}
	st := EpochStats{Examples: tot[2]}
	if tot[2] > 0 {
		st.Loss = float64(tot[0]) / GradScale / float64(tot[2])
		st.Accuracy = float64(tot[1]) / float64(tot[2])
	}
	return st, nil
}

// step reduces the gradient sum of a global batch of n examples and
// applies Adam.
func (t *Trainer) step(ctx context.Context, n int) error {
	if t.cfg.Mode == ModeZeRO {
		if err := t.comm.ReduceScatterSum(ctx, t.sum); err != nil {
			return fmt.Errorf("reduce-scatter the gradient: %w", err)
		}
	} else if err := t.comm.AllReduceSum(ctx, t.sum); err != nil {
		return fmt.Errorf("all-reduce the gradient: %w", err)
	}
	for i, s := range t.sum[t.lo:t.hi] {
		t.grad[i] = float64(s) / GradScale / float64(n)
	}
	t.Steps++
	t.cfg.Adam.Update(t.Steps, t.Model.W[t.lo:t.hi], t.grad, t.m, t.v)
	if t.cfg.Mode == ModeZeRO {
		if err := t.comm.AllGather(ctx, t.Model.W); err != nil {
			return fmt.Errorf("all-gather the parameters: %w", err)
		}
	}
	return nil
}

// gatherChunk is how many values of the optimizer state GatherState
// moves at a time, bounding the memory it borrows.
const gatherChunk = 1 << 16

// GatherState returns, on rank 0, the whole optimizer state (first and
// second moments of every parameter), for a checkpoint; nil on the other
// ranks. In ModeZeRO the shards are summed into rank 0 a chunk at a
// time, each rank contributing its shard and zeros elsewhere (exact), so
// no rank holds more than a chunk beyond its shard, except rank 0.
func (t *Trainer) GatherState(ctx context.Context) (m, v []float64, err error) {
	n := len(t.Model.W)
	rank0 := t.comm.Rank() == 0
	if t.cfg.Mode != ModeZeRO {
		if !rank0 {
			return nil, nil, nil
		}
		return append([]float64(nil), t.m...), append([]float64(nil), t.v...), nil
	}
	if rank0 {
		m, v = make([]float64, n), make([]float64, n)
	}
	buf := make([]float64, min(gatherChunk, n))
	for _, part := range []struct{ mine, all []float64 }{{t.m, m}, {t.v, v}} {
		for off := 0; off < n; off += gatherChunk {
			end := min(off+gatherChunk, n)
			b := buf[:end-off]
			clear(b)
			if lo, hi := max(off, t.lo), min(end, t.hi); lo < hi {
				copy(b[lo-off:hi-off], part.mine[lo-t.lo:hi-t.lo])
			}
			if err := t.comm.ReduceSum(ctx, b); err != nil {
				return nil, nil, fmt.Errorf("gather the optimizer state: %w", err)
			}
			if rank0 {
				copy(part.all[off:end], b)
			}
		}
	}
	return m, v, nil
}

// SetState restores a checkpoint: the steps taken, every parameter and
// the whole optimizer state, of which the trainer keeps its shard.
func (t *Trainer) SetState(steps int, w, m, v []float64) error {
	n := len(t.Model.W)
	if len(w) != n || len(m) != n || len(v) != n {
		return fmt.Errorf("dense: state of %d, %d and %d values for %d parameters", len(w), len(m), len(v), n)
	}
	if steps < 0 {
		return fmt.Errorf("dense: %d steps", steps)
	}
	t.Steps = steps
	copy(t.Model.W, w)
	copy(t.m, m[t.lo:t.hi])
	copy(t.v, v[t.lo:t.hi])
	return nil
}
