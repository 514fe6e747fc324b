package fm

import (
	"fmt"
	"slices"

	"github.com/spindle-ps/spindle/examples/lr/lr"
)

// Model is a trained factorization machine for evaluation: linear weights
// W[i] of WKeys[i] (the bias is the weight of lr.InterceptKey) and
// embeddings V[i*Dim:(i+1)*Dim] of VKeys[i]. Both key lists are sorted
// ascending and unique. A key absent from WKeys has weight 0; a key
// absent from VKeys has its initial embedding (Init), as during training,
// where a key never pushed reads as its initial values.
type Model struct {
	Config
	WKeys []uint64
	W     []float32
	VKeys []uint64
	V     []float32
}

// Validate returns an error if the configuration is invalid, the slices'
// lengths do not match, or a key list is not sorted ascending and unique.
func (m *Model) Validate() error {
	if err := m.Config.Validate(); err != nil {
		return err
	}
	if len(m.WKeys) != len(m.W) {
		return fmt.Errorf("%w: model has %d weight keys and %d weights", lr.ErrLength, len(m.WKeys), len(m.W))
	}
	if len(m.VKeys)*m.Dim != len(m.V) {
		return fmt.Errorf("%w: model has %d embedding keys and %d embedding values (dim %d)", lr.ErrLength, len(m.VKeys), len(m.V), m.Dim)
	}
	for name, keys := range map[string][]uint64{"weight": m.WKeys, "embedding": m.VKeys} {
		for i := 1; i < len(keys); i++ {
			if keys[i] <= keys[i-1] {
				return fmt.Errorf("fm: model %s key %d at position %d follows %d: keys must be sorted ascending and unique", name, keys[i], i, keys[i-1])
			}
		}
	}
	return nil
}

// Weight returns the linear weight of key, 0 if absent.
func (m *Model) Weight(key uint64) float32 {
	if i, ok := slices.BinarySearch(m.WKeys, key); ok {
		return m.W[i]
	}
	return 0
}

// Embedding writes the embedding of key into dst (Dim values).
func (m *Model) Embedding(key uint64, dst []float32) {
	if i, ok := slices.BinarySearch(m.VKeys, key); ok {
		copy(dst, m.V[i*m.Dim:(i+1)*m.Dim])
		return
	}
	Init(key, dst, m.InitScale)
}

// Score returns the margin (log-odds) ŷ of ex under m. It trusts ex and m
// (see Validate): a Vals shorter than Keys panics.
func (m *Model) Score(ex lr.Example) float64 {
	d := m.Dim
	var z float64
	if m.Bias {
		z = float64(m.Weight(lr.InterceptKey))
	}
	sum := make([]float64, d)
	emb := make([]float32, d)
	var sq float64
	for j, k := range ex.Keys {
		x := float64(ex.Vals[j])
		z += float64(m.Weight(k)) * x
		m.Embedding(k, emb)
		for f, vf := range emb {
			t := float64(vf) * x
			sum[f] += t
			sq += t * t
		}
	}
	var inter float64
	for _, s := range sum {
		inter += s * s
	}
	return z + (inter-sq)/2
}

// Evaluate returns the AUC and the mean log loss of m on examples. It
// returns an error if m is invalid, an example is malformed (wrapping
// lr.ErrExample), or the AUC is undefined because all labels are equal.
func (m *Model) Evaluate(examples []lr.Example) (auc, logloss float64, err error) {
	if err := m.Validate(); err != nil {
		return 0, 0, err
	}
	margins := make([]float64, len(examples))
	labels := make([]float32, len(examples))
	for i := range examples {
		ex := &examples[i]
		if err := check(ex, i); err != nil {
			return 0, 0, err
		}
		margins[i] = m.Score(*ex)
		labels[i] = ex.Label
	}
	if logloss, err = lr.LogLoss(margins, labels); err != nil {
		return 0, 0, err
	}
	if auc, err = lr.AUC(margins, labels); err != nil {
		return 0, 0, err
	}
	return auc, logloss, nil
}

// NewModel builds a sorted Model from unsorted rows, as a model's part
// files deliver them: wKeys and w, and vKeys with Dim values each in v.
// The slices are not kept. It returns an error for a key that appears
// twice in the same table or mismatched lengths.
func NewModel(c Config, wKeys []uint64, w []float32, vKeys []uint64, v []float32) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(wKeys) != len(w) || len(vKeys)*c.Dim != len(v) {
		return nil, fmt.Errorf("%w: %d weight keys, %d weights, %d embedding keys, %d embedding values (dim %d)",
			lr.ErrLength, len(wKeys), len(w), len(vKeys), len(v), c.Dim)
	}
	m := &Model{Config: c}
	m.WKeys, m.W = sortRows(wKeys, w, 1)
	m.VKeys, m.V = sortRows(vKeys, v, c.Dim)
	return m, m.Validate()
}

// sortRows returns copies of keys and their d values each, sorted by key.
func sortRows(keys []uint64, vals []float32, d int) ([]uint64, []float32) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case keys[a] < keys[b]:
			return -1
		case keys[a] > keys[b]:
			return 1
		}
		return 0
	})
	sk := make([]uint64, len(keys))
	sv := make([]float32, len(vals))
	for i, j := range idx {
		sk[i] = keys[j]
		copy(sv[i*d:(i+1)*d], vals[j*d:(j+1)*d])
	}
	return sk, sv
}
