package dense

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
)

// hub joins the ranks of memComm: each collective deposits every rank's
// buffer, then each rank computes its result from all of them in rank
// order, as the real collectives promise.
type hub struct {
	n    int
	mu   sync.Mutex
	cond *sync.Cond
	gen  int
	in   int
	bufs []any
}

func newHub(n int) *hub {
	h := &hub{n: n, bufs: make([]any, n)}
	h.cond = sync.NewCond(&h.mu)
	return h
}

// exchange deposits buf for rank and returns every rank's, once all have
// deposited; a second barrier keeps the slots until everyone has read.
func (h *hub) exchange(rank int, buf any) []any {
	h.barrier(func() { h.bufs[rank] = buf })
	all := append([]any(nil), h.bufs...)
	h.barrier(func() {})
	return all
}

func (h *hub) barrier(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
	gen := h.gen
	h.in++
	if h.in == h.n {
		h.in, h.gen = 0, h.gen+1
		h.cond.Broadcast()
		return
	}
	for gen == h.gen {
		h.cond.Wait()
	}
}

type memComm struct {
	h    *hub
	rank int
}

func (c memComm) Rank() int { return c.rank }
func (c memComm) Size() int { return c.h.n }
func (c memComm) Shard(n, rank int) (int, int) {
	q, r := n/c.h.n, n%c.h.n
	lo := rank*q + min(rank, r)
	hi := lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

func (c memComm) AllReduceSum(_ context.Context, buf []int64) error {
	all := c.h.exchange(c.rank, append([]int64(nil), buf...))
	clear(buf)
	for _, b := range all {
		for i, v := range b.([]int64) {
			buf[i] += v
		}
	}
	return nil
}

func (c memComm) ReduceScatterSum(ctx context.Context, buf []int64) error {
	full := append([]int64(nil), buf...)
	if err := c.AllReduceSum(ctx, full); err != nil {
		return err
	}
	clear(buf)
	lo, hi := c.Shard(len(buf), c.rank)
	copy(buf[lo:hi], full[lo:hi])
	return nil
}

func (c memComm) AllGather(_ context.Context, buf []float64) error {
	all := c.h.exchange(c.rank, append([]float64(nil), buf...))
	for r, b := range all {
		lo, hi := c.Shard(len(buf), r)
		copy(buf[lo:hi], b.([]float64)[lo:hi])
	}
	return nil
}

func (c memComm) ReduceSum(_ context.Context, buf []float64) error {
	all := c.h.exchange(c.rank, append([]float64(nil), buf...))
	if c.rank != 0 {
		return nil
	}
	clear(buf)
	for _, b := range all {
		for i, v := range b.([]float64) {
			buf[i] += v
		}
	}
	return nil
}

func (c memComm) Broadcast(_ context.Context, buf []int64) error {
	all := c.h.exchange(c.rank, append([]int64(nil), buf...))
	copy(buf, all[0].([]int64))
	return nil
}

func genData(t *testing.T, rows int) (*Data, GenConfig) {
	t.Helper()
	g := GenConfig{Rows: rows, Features: 7, Classes: 3, ModelSeed: 5, RowSeed: 6}
	var b bytes.Buffer
	if err := g.Generate(&b); err != nil {
		t.Fatal(err)
	}
	d := &Data{}
	for i, line := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		if err := d.ParseLine(line, g.Classes); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
	}
	return d, g
}

// train runs epochs on n ranks (Local when n is 0) and returns rank 0's
// trainer.
func train(t *testing.T, cfg Config, data *Data, k, n, epochs int) *Trainer {
	t.Helper()
	if n == 0 {
		tr, err := NewTrainer(cfg, Local{}, data, k)
		if err != nil {
			t.Fatal(err)
		}
		for e := range epochs {
			if _, err := tr.Epoch(context.Background(), e); err != nil {
				t.Fatal(err)
			}
		}
		return tr
	}
	h := newHub(n)
	trs := make([]*Trainer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := NewTrainer(cfg, memComm{h, r}, data, k)
			if err != nil {
				errs[r] = err
				return
			}
			trs[r] = tr
			for e := range epochs {
				if _, err := tr.Epoch(context.Background(), e); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r, tr := range trs[1:] {
		if !sameBits(tr.Model.W, trs[0].Model.W) {
			t.Fatalf("rank %d's parameters differ from rank 0's", r+1)
		}
	}
	return trs[0]
}

func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestRanksReachTheSingleProcessModel: plain and ZeRO training on 2, 3
// and 4 ranks compute the single process's parameters bit for bit, and
// the model learns (a wrong gradient would not reach the accuracy).
func TestRanksReachTheSingleProcessModel(t *testing.T) {
	t.Parallel()
	data, g := genData(t, 1500)
	cfg := Config{Mode: ModePlain, Batch: 100, Seed: 3, Adam: DefaultAdam()}
	ref := train(t, cfg, data, g.Classes, 0, 3)
	trueAcc, _, _ := g.TrueModel().Evaluate(data)
	acc, _, err := ref.Model.Evaluate(data)
	if err != nil {
		t.Fatal(err)
	}
	if acc < trueAcc-0.05 {
		t.Errorf("single process: accuracy %.4f, the true model's %.4f", acc, trueAcc)
	}
	for _, mode := range []string{ModePlain, ModeZeRO} {
		for _, n := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("mode=%s/ranks=%d", mode, n), func(t *testing.T) {
				t.Parallel()
				c := cfg
				c.Mode = mode
				tr := train(t, c, data, g.Classes, n, 3)
				if !sameBits(tr.Model.W, ref.Model.W) {
					t.Errorf("parameters differ from the single process's")
				}
				whole := int64(16 * len(ref.Model.W))
				switch got := tr.OptimizerBytes(); {
				case mode == ModePlain && got != whole:
					t.Errorf("plain: %d bytes of optimizer state, want %d", got, whole)
				case mode == ModeZeRO && got > 16*int64((len(ref.Model.W)+n-1)/n):
					t.Errorf("zero: %d bytes of optimizer state on rank 0 of %d, whole %d", got, n, whole)
				}
			})
		}
	}
}

// TestStateRoundTrip: a ZeRO trainer's gathered state, restored into a
// fresh plain trainer, continues exactly as the uninterrupted run.
func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	data, g := genData(t, 600)
	cfg := Config{Mode: ModeZeRO, Batch: 64, Seed: 9, Adam: DefaultAdam()}
	h := newHub(3)
	var wg sync.WaitGroup
	var m, v, w []float64
	var steps int
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := NewTrainer(cfg, memComm{h, r}, data, g.Classes)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := tr.Epoch(context.Background(), 0); err != nil {
				t.Error(err)
				return
			}
			mm, vv, err := tr.GatherState(context.Background())
			if err != nil {
				t.Error(err)
			}
			if r == 0 {
				m, v, w, steps = mm, vv, append([]float64(nil), tr.Model.W...), tr.Steps
			} else if mm != nil {
				t.Errorf("rank %d got the gathered state", r)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	plain := cfg
	plain.Mode = ModePlain
	ref := train(t, plain, data, g.Classes, 0, 2)
	tr, err := NewTrainer(plain, Local{}, data, g.Classes)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetState(steps, w, m, v); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Epoch(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if !sameBits(tr.Model.W, ref.Model.W) {
		t.Error("a restored trainer does not continue as the uninterrupted one")
	}
}

func TestParseLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		want       string // an error's text; "" for none
	}{
		{"good", "2, 1.5,-3,0", ""},
		{"label out of range", "3,1,2,3", "label"},
		{"negative label", "-1,1,2,3", "label"},
		{"too few", "1,1,2", "2 features, want 3"},
		{"no features", "1", "no features"},
		{"nan", "1,NaN,2,3", "feature 1"},
		{"huge", "1,1e9,2,3", "feature 1"},
		{"text", "1,a,2,3", "feature 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := &Data{D: 3}
			err := d.ParseLine([]byte(tt.line), 3)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("%q: %v", tt.line, err)
			case tt.want != "" && (err == nil || !errors.Is(err, ErrSyntax) || !bytes.Contains([]byte(err.Error()), []byte(tt.want))):
				t.Fatalf("%q: %v, want an error with %q", tt.line, err, tt.want)
			case tt.want != "" && (d.Len() != 0 || len(d.X) != 0):
				t.Fatalf("%q: a bad line left %d examples and %d values", tt.line, d.Len(), len(d.X))
			}
		})
	}
}

// FuzzParseLine: no line panics, and a line accepted leaves one example
// of D features.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"1,2,3", "0, -1.5e3 ,4", ",,", "9,1,1", "1,inf,2", "2," + string(bytes.Repeat([]byte("1,"), 50))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := &Data{}
		err := d.ParseLine(line, 4)
		if err == nil && (d.Len() != 1 || len(d.X) != d.D || d.Y[0] < 0 || d.Y[0] >= 4) {
			t.Fatalf("%q: accepted as %d examples of %d values (D %d)", line, d.Len(), len(d.X), d.D)
		}
		if err != nil && (d.Len() != 0 || len(d.X) != 0) {
			t.Fatalf("%q: rejected but left %d examples", line, d.Len())
		}
	})
}
