package fm

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/spindle-ps/spindle/examples/lr/lr"
)

// MaxDim is the largest embedding dimension Config.Validate accepts.
const MaxDim = 1024

// DefaultDim is the embedding dimension of DefaultConfig.
const DefaultDim = 8

// DefaultInitScale is the default half-width of the range of the initial
// embedding values (see Init).
const DefaultInitScale = 0.01

// ErrConfig is wrapped by the errors of Config.Validate.
var ErrConfig = errors.New("fm: invalid configuration")

// Config is the shape of a factorization machine.
type Config struct {
	// Dim is the embedding dimension d, in [1, MaxDim]; default 8.
	Dim int
	// Bias says whether the model has a global bias w0, the weight of
	// lr.InterceptKey. Without it the margin has no constant term and
	// Gradient leaves the bias's gradient 0.
	Bias bool
	// InitScale is the half-width of the range of initial embedding
	// values: Init draws them uniformly in [-InitScale, InitScale). It
	// must be positive and finite: embeddings that start at 0 stay there,
	// since the gradient of the interaction term vanishes at v = 0.
	InitScale float64
}

// DefaultConfig returns dimension 8, a bias, and initial embedding values
// in [-0.01, 0.01).
func DefaultConfig() Config {
	return Config{Dim: DefaultDim, Bias: true, InitScale: DefaultInitScale}
}

// Validate checks every field and reports all the problems it finds.
func (c Config) Validate() error {
	var errs []error
	if c.Dim < 1 || c.Dim > MaxDim {
		errs = append(errs, fmt.Errorf("%w: dim %d, want 1 to %d", ErrConfig, c.Dim, MaxDim))
	}
	if math.IsNaN(c.InitScale) || math.IsInf(c.InitScale, 0) || c.InitScale <= 0 {
		errs = append(errs, fmt.Errorf("%w: init scale %v, want positive and finite", ErrConfig, c.InitScale))
	}
	return errors.Join(errs...)
}

// FeatureKeys returns the keys whose embeddings a batch needs: keys (as
// lr.BatchKeys returns them) without the intercept key, which has no
// embedding. The result shares keys's storage.
func FeatureKeys(keys []uint64) []uint64 {
	if len(keys) > 0 && keys[0] == lr.InterceptKey {
		return keys[1:]
	}
	return keys
}

// WeightKeys returns the keys whose linear weights a batch pushes: keys
// with the intercept key when the model has a bias, FeatureKeys(keys)
// when not. The result shares keys's storage.
func (c Config) WeightKeys(keys []uint64) []uint64 {
	if c.Bias {
		return keys
	}
	return FeatureKeys(keys)
}

// Gradient computes, for the examples of batch, the gradient of the log
// loss summed over the batch with respect to the linear weights w and the
// embeddings v of keys, into gw and gv, and returns the summed log loss.
//
// keys must be sorted ascending, start with lr.InterceptKey and contain
// every key of batch, as lr.BatchKeys returns them. w[i] is the weight of
// keys[i] (w[0] the bias, ignored without Config.Bias); v holds the
// embeddings of keys[1:], Dim values each: the embedding of keys[i] is
// v[(i-1)*Dim : i*Dim]. gw and gv have the lengths of w and v and are
// overwritten: gw[i] = Σ_examples weight·(σ(ŷ)-y)·x_i, and gv holds
// Σ_examples weight·(σ(ŷ)-y)·x_i·(Σ_j v_jf x_j - v_if x_i) for each key i
// and factor f (weight: lr.Example.WeightOr1). These are sums, not means,
// like lr.Gradient's, and the loss is weighted alike.
//
// Gradient returns an error wrapping lr.ErrLength, lr.ErrKeys or
// lr.ErrExample if the arguments break these rules; gw and gv are then
// unspecified.
func (c Config) Gradient(batch []lr.Example, keys []uint64, w, v, gw, gv []float32) (lossSum float64, err error) {
	d := c.Dim
	if d < 1 {
		return 0, fmt.Errorf("%w: dim %d", ErrConfig, d)
	}
	if len(keys) == 0 || keys[0] != lr.InterceptKey {
		return 0, fmt.Errorf("%w: keys must start with the intercept key %d", lr.ErrKeys, lr.InterceptKey)
	}
	if len(w) != len(keys) || len(gw) != len(keys) || len(v) != (len(keys)-1)*d || len(gv) != len(v) {
		return 0, fmt.Errorf("%w: %d keys, %d weights, %d weight gradients, %d embedding values and %d embedding gradients (dim %d)",
			lr.ErrLength, len(keys), len(w), len(gw), len(v), len(gv), d)
	}
	clear(gw)
	clear(gv)
	var w0 float64
	if c.Bias {
		w0 = float64(w[0])
	}
	sum := make([]float64, d)
	var pos []int
	for i := range batch {
		ex := &batch[i]
		if pos, err = positions(ex, i, keys, pos); err != nil {
			return 0, err
		}
		z := w0 + margin(ex, pos, w, v, d, sum)
		y, wt := float64(ex.Label), ex.WeightOr1()
		lossSum += wt * logLoss(z, y)
		g := wt * (lr.Sigmoid(z) - y)
		if c.Bias {
			gw[0] += float32(g)
		}
		for j, p := range pos {
			x := float64(ex.Vals[j])
			gw[p] += float32(g * x)
			vi, gi := v[(p-1)*d:p*d], gv[(p-1)*d:p*d]
			for f := range d {
				gi[f] += float32(g * x * (sum[f] - float64(vi[f])*x))
			}
		}
	}
	return lossSum, nil
}

// margin returns ŷ - w0 for ex, whose keys are at positions pos of the
// batch's keys, and leaves Σ_i v_if x_i in sum[f].
func margin(ex *lr.Example, pos []int, w, v []float32, d int, sum []float64) float64 {
	clear(sum)
	var z, sq float64
	for j, p := range pos {
		x := float64(ex.Vals[j])
		z += float64(w[p]) * x
		for f, vf := range v[(p-1)*d : p*d] {
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

// positions checks ex, the i-th example of its batch, and returns the
// positions of its keys in keys, reusing dst.
func positions(ex *lr.Example, i int, keys []uint64, dst []int) ([]int, error) {
	if err := check(ex, i); err != nil {
		return dst[:0], err
	}
	dst = dst[:0]
	lo := 1
	for _, k := range ex.Keys {
		p, ok := slices.BinarySearch(keys[lo:], k)
		if !ok {
			return dst, fmt.Errorf("%w: key %d of example %d is missing", lr.ErrKeys, k, i)
		}
		lo += p
		dst = append(dst, lo)
		lo++
	}
	return dst, nil
}

// check validates ex, the i-th example of its batch: lr's checks (a
// label of 0 or 1, a weight, as many values as keys), and keys
// ascending, unique and not the intercept's.
func check(ex *lr.Example, i int) error {
	if err := ex.Check(i); err != nil {
		return err
	}
	prev := lr.InterceptKey
	for j, k := range ex.Keys {
		if k <= prev {
			return fmt.Errorf("%w: example %d: key %d at position %d is not above %d: keys must be sorted ascending, unique and above the intercept key",
				lr.ErrExample, i, k, j, prev)
		}
		prev = k
	}
	return nil
}

// logLoss is the log loss of margin z for label y (0 or 1), exact for
// large |z|.
func logLoss(z, y float64) float64 {
	if y == 1 {
		z = -z
	}
	return max(z, 0) + math.Log1p(math.Exp(-math.Abs(z)))
}

// Init writes the initial embedding of key into vals (Dim values): values
// drawn uniformly in [-scale, scale) from a generator seeded by the key
// alone. Every server and worker computes the same embedding for a key
// without communicating, and a job starts from the same model every run.
func Init(key uint64, vals []float32, scale float64) {
	s := key ^ 0x6a09e667f3bcc909
	for f := range vals {
		u := float64(splitmix64(&s)>>11) / (1 << 53) // in [0, 1)
		vals[f] = float32(scale * (2*u - 1))
	}
}

// splitmix64 advances the state and returns its next output.
func splitmix64(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
