package dense

import "math"

// Adam are the optimizer's settings.
type Adam struct {
	LR, Beta1, Beta2, Eps float64
}

// DefaultAdam returns the usual settings, with a learning rate suited to
// the generated data.
func DefaultAdam() Adam { return Adam{LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// Update applies Adam's step t (from 1) to params with the gradient grad
// and the moments m and v, all of the same length, element by element:
// the result of an element depends on that element alone, so a shard
// updated on its own gets the same bits as the whole.
func (a Adam) Update(t int, params, grad, m, v []float64) {
	c1 := 1 - math.Pow(a.Beta1, float64(t))
	c2 := 1 - math.Pow(a.Beta2, float64(t))
	for i, g := range grad {
		m[i] = a.Beta1*m[i] + (1-a.Beta1)*g
		v[i] = a.Beta2*v[i] + (1-a.Beta2)*g*g
		params[i] -= a.LR * (m[i] / c1) / (math.Sqrt(v[i]/c2) + a.Eps)
	}
}
