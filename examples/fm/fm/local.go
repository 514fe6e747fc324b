package fm

import (
	"errors"
	"fmt"

	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/psnode/store"
)

// Local trains a factorization machine in memory, in one goroutine, with
// the updates the distributed trainer applies with one worker and one
// server: for each mini-batch it takes the batch's keys (lr.BatchKeys),
// pulls their weights (0 for a key never pushed) and embeddings (Init's
// values for a key never pushed), computes the summed gradients
// (Config.Gradient) and pushes them, each table's updater applying them
// in key order. It is the baseline the distributed trainer is checked
// against, and the quick way to tune the trainer's defaults.
//
// Local is not safe for concurrent use.
type Local struct {
	cfg        Config
	wUpd, vUpd store.Updater[float32]
	w, v       *store.Table[float32]

	keys           []uint64
	wv, vv, gw, gv []float32
}

// NewLocal returns a trainer of an empty model of shape cfg, its weights
// updated by wUpd and its embeddings by vUpd.
func NewLocal(cfg Config, wUpd, vUpd store.Updater[float32]) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if wUpd == nil || vUpd == nil {
		return nil, errors.New("fm: local trainer needs two updaters")
	}
	w, err := newLocalTable(1, wUpd)
	if err != nil {
		return nil, err
	}
	v, err := newLocalTable(cfg.Dim, vUpd)
	if err != nil {
		return nil, err
	}
	scale := cfg.InitScale
	v.SetInit(func(key uint64, vals, _ []float32) { Init(key, vals, scale) })
	return &Local{cfg: cfg, wUpd: wUpd, vUpd: vUpd, w: w, v: v}, nil
}

// newLocalTable makes a table of dim values per key for upd that chooses
// its layout by itself, as a server's store handler's does.
func newLocalTable(dim int, upd store.Updater[float32]) (*store.Table[float32], error) {
	t, err := store.NewTable[float32](dim, upd.StateWidth(), 0)
	if err == nil {
		err = t.AutoDense(store.MaxDenseKeys)
	}
	if err != nil {
		return nil, fmt.Errorf("fm: local trainer: %w", err)
	}
	return t, nil
}

// Step trains on one mini-batch and returns the summed log loss of its
// examples under the model before the update. An empty batch changes
// nothing. A malformed example leaves the model unchanged and returns an
// error wrapping lr.ErrExample.
func (l *Local) Step(batch []lr.Example) (loss float64, err error) {
	if len(batch) == 0 {
		return 0, nil
	}
	if l.keys, err = lr.BatchKeys(batch, l.keys); err != nil {
		return 0, err
	}
	keys, d := l.keys, l.cfg.Dim
	fk := FeatureKeys(keys)
	l.wv = resize(l.wv, len(keys))
	l.gw = resize(l.gw, len(keys))
	l.vv = resize(l.vv, len(fk)*d)
	l.gv = resize(l.gv, len(fk)*d)
	for i, k := range keys {
		l.wv[i] = 0
		if slot, ok := l.w.Lookup(k); ok {
			l.wv[i] = l.w.Vals(slot)[0]
		}
	}
	for i, k := range fk {
		dst := l.vv[i*d : (i+1)*d]
		if slot, ok := l.v.Lookup(k); ok {
			copy(dst, l.v.Vals(slot))
		} else {
			Init(k, dst, l.cfg.InitScale)
		}
	}
	if loss, err = l.cfg.Gradient(batch, keys, l.wv, l.vv, l.gw, l.gv); err != nil {
		return 0, err
	}
	wk := l.cfg.WeightKeys(keys)
	gw := l.gw[len(keys)-len(wk):]
	// Each slot is used before the next Insert, which may move it.
	for i, k := range wk {
		slot, _ := l.w.Insert(k)
		l.wUpd.Apply(l.w.Vals(slot), l.w.State(slot), gw[i:i+1])
	}
	for i, k := range fk {
		slot, _ := l.v.Insert(k)
		l.vUpd.Apply(l.v.Vals(slot), l.v.State(slot), l.gv[i*d:(i+1)*d])
	}
	return loss, nil
}

// Epoch runs Step on consecutive batches of batchSize examples (the last
// possibly shorter) and returns the summed loss.
func (l *Local) Epoch(examples []lr.Example, batchSize int) (loss float64, err error) {
	if batchSize < 1 {
		return 0, fmt.Errorf("fm: batch size %d, want at least 1", batchSize)
	}
	for start := 0; start < len(examples); start += batchSize {
		l2, err := l.Step(examples[start:min(start+batchSize, len(examples))])
		if err != nil {
			return loss, fmt.Errorf("batch at example %d: %w", start, err)
		}
		loss += l2
	}
	return loss, nil
}

// Model returns a copy of the current model: every stored key's weight
// and embedding.
func (l *Local) Model() *Model {
	m := &Model{Config: l.cfg}
	m.WKeys = l.w.SortedKeys()
	m.W = make([]float32, len(m.WKeys))
	for i, k := range m.WKeys {
		slot, _ := l.w.Lookup(k)
		m.W[i] = l.w.Vals(slot)[0]
	}
	m.VKeys = l.v.SortedKeys()
	m.V = make([]float32, 0, len(m.VKeys)*l.cfg.Dim)
	for _, k := range m.VKeys {
		slot, _ := l.v.Lookup(k)
		m.V = append(m.V, l.v.Vals(slot)...)
	}
	return m
}

func resize(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
