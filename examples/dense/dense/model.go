package dense

import (
	"fmt"
	"math"
)

// Model is softmax regression: K classes over D features. W holds
// (D+1)×K values, row j the weights of feature j for each class, row D
// the biases.
type Model struct {
	D, K int
	W    []float64
}

// NewModel returns a model of d features and k classes with zero
// weights.
func NewModel(d, k int) Model { return Model{D: d, K: k, W: make([]float64, (d+1)*k)} }

// NumParams is the number of parameters of a model of d features and k
// classes.
func NumParams(d, k int) int { return (d + 1) * k }

// GradScale is the fixed-point scale of gradient sums: a sum s stands
// for s / GradScale.
const GradScale = 1 << 32

// MaxFeature bounds the absolute value of a feature; MaxBatch the
// examples of a global batch. Together they keep gradient sums exact in
// int64 (see the package documentation).
const (
	MaxFeature = 1 << 16
	MaxBatch   = 1 << 14
)

// probs writes the class probabilities of x into p (length K) and
// returns them.
func (m Model) probs(x []float64, p []float64) []float64 {
	k := m.K
	for c := 0; c < k; c++ {
		p[c] = m.W[m.D*k+c]
	}
	for j, xj := range x {
		if xj == 0 {
			continue
		}
		row := m.W[j*k : (j+1)*k]
		for c := range p[:k] {
			p[c] += row[c] * xj
		}
	}
	mx := p[0]
	for _, v := range p[1:k] {
		mx = max(mx, v)
	}
	var sum float64
	for c := range p[:k] {
		p[c] = math.Exp(p[c] - mx)
		sum += p[c]
	}
	for c := range p[:k] {
		p[c] /= sum
	}
	return p
}

// Predict returns the most likely class of x.
func (m Model) Predict(x []float64, scratch []float64) int {
	p := m.probs(x, scratch[:m.K])
	best := 0
	for c := 1; c < m.K; c++ {
		if p[c] > p[best] {
			best = c
		}
	}
	return best
}

// minProb bounds the probability a loss is taken of, so that a confident
// mistake costs at most -log(minProb) ≈ 34.5.
const minProb = 1e-15

// quantize rounds v to the fixed point of GradScale.
func quantize(v float64) int64 { return int64(math.Round(v * GradScale)) }

// AddGrad adds the gradient of the cross-entropy loss of the examples
// rows of data to sum, in GradScale fixed point, and returns their loss
// (float64, summed in row order) and how many it predicts right. p is
// scratch of length K.
func (m Model) AddGrad(data *Data, rows []int, sum []int64, p []float64) (loss float64, correct int) {
	k := m.K
	for _, i := range rows {
		x, y := data.Row(i), int(data.Y[i])
		m.probs(x, p)
		best := 0
		for c := 1; c < k; c++ {
			if p[c] > p[best] {
				best = c
			}
		}
		if best == y {
			correct++
		}
		loss -= math.Log(max(p[y], minProb))
		p[y]-- // p - onehot(y): the gradient of the logits
		for j, xj := range x {
			if xj == 0 {
				continue
			}
			row := sum[j*k : (j+1)*k]
			for c := range row {
				row[c] += quantize(p[c] * xj)
			}
		}
		bias := sum[m.D*k : (m.D+1)*k]
		for c := range bias {
			bias[c] += quantize(p[c])
		}
	}
	return loss, correct
}

// Evaluate returns the accuracy and mean loss of m on data.
func (m Model) Evaluate(data *Data) (accuracy, loss float64, err error) {
	if data.D != m.D {
		return 0, 0, fmt.Errorf("dense: data of %d features for a model of %d", data.D, m.D)
	}
	if data.Len() == 0 {
		return 0, 0, fmt.Errorf("dense: no examples to evaluate on")
	}
	p := make([]float64, m.K)
	correct := 0
	for i := range data.Len() {
		y := int(data.Y[i])
		if y >= m.K {
			return 0, 0, fmt.Errorf("dense: example %d has class %d; the model has %d", i, y, m.K)
		}
		m.probs(data.Row(i), p)
		best := 0
		for c := 1; c < m.K; c++ {
			if p[c] > p[best] {
				best = c
			}
		}
		if best == y {
			correct++
		}
		loss -= math.Log(max(p[y], minProb))
	}
	n := float64(data.Len())
	return float64(correct) / n, loss / n, nil
}
