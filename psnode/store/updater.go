package store

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

var (
	// ErrUnknownUpdater is returned by NewUpdater for an unknown name.
	ErrUnknownUpdater = errors.New("store: unknown updater")
	// ErrUnknownParam is returned by NewUpdater for a parameter the named
	// updater does not have.
	ErrUnknownParam = errors.New("store: unknown updater parameter")
	// ErrLength is returned by CheckApply and VarTable.Insert when slice
	// lengths do not match.
	ErrLength = errors.New("store: length mismatch")
	// ErrSlot is returned by Table.UpdateAt for a slot outside the table.
	ErrSlot = errors.New("store: slot outside the table")
)

// Updater applies gradients to weights.
//
// Apply updates the weights w (len n) in place from the gradient g (len n),
// using and updating the optimizer state s, which holds StateWidth() values
// per weight, interleaved: the state of w[i] is s[i*StateWidth() :
// (i+1)*StateWidth()]. This is the layout of Table.State, so the values and
// state of one slot, or of several adjacent ones, can be passed directly.
// The state of a weight that was never updated is all zero.
//
// Apply requires len(g) == len(w) and len(s) >= len(w)*StateWidth(), and
// panics otherwise; lengths that come from a peer must be checked first,
// for example with CheckApply. Apply does not allocate, and is safe for
// concurrent use on disjoint slices.
type Updater[V Number] interface {
	// Name returns the name NewUpdater knows the updater by.
	Name() string
	// StateWidth returns the number of state values per weight.
	StateWidth() int
	// Apply updates w in place from g, using and updating s.
	Apply(w, s, g []V)
}

// CheckApply reports whether w, s and g satisfy the length requirements of
// u.Apply, with an error wrapping ErrLength if not.
func CheckApply[V Number](u Updater[V], w, s, g []V) error {
	if len(g) != len(w) {
		return fmt.Errorf("%w: %d gradients for %d weights", ErrLength, len(g), len(w))
	}
	if need := len(w) * u.StateWidth(); len(s) < need {
		return fmt.Errorf("%w: %s needs %d state values for %d weights, got %d", ErrLength, u.Name(), need, len(w), len(s))
	}
	return nil
}

// Updater names accepted by NewUpdater.
const (
	NameSum     = "sum"
	NameSGD     = "sgd"
	NameAdaGrad = "adagrad"
	NameFTRL    = "ftrl"
	NameAdam    = "adam"
)

// UpdaterNames returns the names NewUpdater accepts, sorted.
func UpdaterNames() []string {
	return []string{NameAdaGrad, NameAdam, NameFTRL, NameSGD, NameSum}
}

// NewUpdater returns the updater called name ("sum", "sgd", "adagrad",
// "ftrl" or "adam") with its defaults overridden by params, whose keys are
// the lower-case names of the updater's fields ("lr", "l2", "eps", "alpha",
// "beta", "l1", "beta1", "beta2"). It returns an error wrapping
// ErrUnknownUpdater or ErrUnknownParam for a name or parameter it does not
// know, and the updater's Validate error for out-of-range values.
func NewUpdater[V Number](name string, params map[string]float64) (Updater[V], error) {
	// fields points into the updater that build returns once they are set.
	var (
		fields map[string]*float64
		build  func() (Updater[V], error)
	)
	switch name {
	case NameSum:
		build = func() (Updater[V], error) { return Sum[V]{}, nil }
	case NameSGD:
		u := DefaultSGD[V]()
		fields = map[string]*float64{"lr": &u.LR, "l2": &u.L2}
		build = func() (Updater[V], error) { return u, u.Validate() }
	case NameAdaGrad:
		u := DefaultAdaGrad[V]()
		fields = map[string]*float64{"lr": &u.LR, "eps": &u.Eps, "l2": &u.L2}
		build = func() (Updater[V], error) { return u, u.Validate() }
	case NameFTRL:
		u := DefaultFTRL[V]()
		fields = map[string]*float64{"alpha": &u.Alpha, "beta": &u.Beta, "l1": &u.L1, "l2": &u.L2}
		build = func() (Updater[V], error) { return u, u.Validate() }
	case NameAdam:
		u := DefaultAdam[V]()
		fields = map[string]*float64{"lr": &u.LR, "beta1": &u.Beta1, "beta2": &u.Beta2, "eps": &u.Eps}
		build = func() (Updater[V], error) { return u, u.Validate() }
	default:
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownUpdater, name, strings.Join(UpdaterNames(), ", "))
	}
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(params)) {
		f, ok := fields[p]
		if !ok {
			known := "none"
			if len(fields) > 0 {
				known = strings.Join(slices.Sorted(maps.Keys(fields)), ", ")
			}
			errs = append(errs, fmt.Errorf("%w %q for %s (known: %s)", ErrUnknownParam, p, name, known))
			continue
		}
		*f = params[p]
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	u, err := build()
	if err != nil {
		return nil, err
	}
	return u, nil
}

// checkParam returns an error if v is not finite or not above (or, when
// orEqual is set, at least) lo.
func checkParam(updater, name string, v, lo float64, orEqual bool) error {
	ok := !math.IsNaN(v) && !math.IsInf(v, 0) && (v > lo || orEqual && v == lo)
	if ok {
		return nil
	}
	op := ">"
	if orEqual {
		op = ">="
	}
	return fmt.Errorf("%w: %s %s = %v, want finite and %s %v", ErrInvalidConfig, updater, name, v, op, lo)
}

// Sum adds the gradient to the weight: w += g. It aggregates pushed values
// rather than optimizing.
type Sum[V Number] struct{}

// Name returns "sum".
func (Sum[V]) Name() string { return NameSum }

// StateWidth returns 0.
func (Sum[V]) StateWidth() int { return 0 }

// Validate returns nil: Sum has no parameters.
func (Sum[V]) Validate() error { return nil }

// Apply sets w[i] += g[i].
func (Sum[V]) Apply(w, _, g []V) {
	g = g[:len(w)]
	for i := range w {
		w[i] += g[i]
	}
}

// SGD is plain stochastic gradient descent with L2 regularization:
// w -= LR * (g + L2*w).
type SGD[V Number] struct {
	LR float64 // learning rate, > 0; default 0.01
	L2 float64 // L2 regularization strength, >= 0; default 0
}

// DefaultSGD returns SGD with LR 0.01 and no regularization.
func DefaultSGD[V Number]() SGD[V] { return SGD[V]{LR: 0.01} }

// Name returns "sgd".
func (SGD[V]) Name() string { return NameSGD }

// StateWidth returns 0.
func (SGD[V]) StateWidth() int { return 0 }

// Validate checks that LR > 0 and L2 >= 0, both finite.
func (u SGD[V]) Validate() error {
	return errors.Join(
		checkParam(NameSGD, "lr", u.LR, 0, false),
		checkParam(NameSGD, "l2", u.L2, 0, true),
	)
}

// Apply sets w[i] -= LR * (g[i] + L2*w[i]).
func (u SGD[V]) Apply(w, _, g []V) {
	g = g[:len(w)]
	for i := range w {
		wi := float64(w[i])
		w[i] = V(wi - u.LR*(float64(g[i])+u.L2*wi))
	}
}

// AdaGrad scales each coordinate's step by the inverse square root of its
// accumulated squared gradients (Duchi et al. 2011). With g' = g + L2*w:
//
//	h += g'²
//	w -= LR * g' / (sqrt(h) + Eps)
//
// The state of each weight is h.
type AdaGrad[V Number] struct {
	LR  float64 // learning rate, > 0; default 0.01
	Eps float64 // added to the denominator, > 0; default 1e-10
	L2  float64 // L2 regularization strength, >= 0; default 0
}

// DefaultAdaGrad returns AdaGrad with LR 0.01, Eps 1e-10 and no
// regularization.
func DefaultAdaGrad[V Number]() AdaGrad[V] { return AdaGrad[V]{LR: 0.01, Eps: 1e-10} }

// Name returns "adagrad".
func (AdaGrad[V]) Name() string { return NameAdaGrad }

// StateWidth returns 1: the accumulated squared gradient.
func (AdaGrad[V]) StateWidth() int { return 1 }

// Validate checks that LR > 0, Eps > 0 and L2 >= 0, all finite.
func (u AdaGrad[V]) Validate() error {
	return errors.Join(
		checkParam(NameAdaGrad, "lr", u.LR, 0, false),
		checkParam(NameAdaGrad, "eps", u.Eps, 0, false),
		checkParam(NameAdaGrad, "l2", u.L2, 0, true),
	)
}

// Apply performs one AdaGrad step per coordinate.
func (u AdaGrad[V]) Apply(w, s, g []V) {
	g, s = g[:len(w)], s[:len(w)]
	for i := range w {
		wi := float64(w[i])
		gi := float64(g[i]) + u.L2*wi
		h := float64(s[i]) + gi*gi
		s[i] = V(h)
		w[i] = V(wi - u.LR*gi/(math.Sqrt(h)+u.Eps))
	}
}

// FTRL is per-coordinate FTRL-Proximal (McMahan et al., "Ad Click
// Prediction: a View from the Trenches", KDD 2013, Algorithm 1). The state
// of each weight is (z, n), and the weight is a function of it:
//
//	w = 0                                                if |z| <= L1
//	w = -(z - sign(z)*L1) / ((Beta + sqrt(n))/Alpha + L2)  otherwise
//
// For a gradient g, with w computed from the state before the update:
//
//	sigma = (sqrt(n + g²) - sqrt(n)) / Alpha
//	z += g - sigma*w
//	n += g²
//
// after which Apply stores the weight computed from the new state in w.
// Values written to w from elsewhere are therefore overwritten. The L1 term
// keeps weights exactly 0 until their |z| exceeds L1, which makes the model
// sparse.
type FTRL[V Number] struct {
	Alpha float64 // learning rate, > 0; default 0.1
	Beta  float64 // smoothing of the per-coordinate rate, > 0; default 1
	L1    float64 // L1 regularization strength, >= 0; default 1
	L2    float64 // L2 regularization strength, >= 0; default 1
}

// DefaultFTRL returns FTRL with Alpha 0.1, Beta 1, L1 1 and L2 1.
func DefaultFTRL[V Number]() FTRL[V] { return FTRL[V]{Alpha: 0.1, Beta: 1, L1: 1, L2: 1} }

// Name returns "ftrl".
func (FTRL[V]) Name() string { return NameFTRL }

// StateWidth returns 2: z and n.
func (FTRL[V]) StateWidth() int { return 2 }

// Validate checks that Alpha > 0, Beta > 0 and L1, L2 >= 0, all finite.
// Beta must be positive so that the weight of a coordinate whose n rounds
// to 0 in the state stays finite.
func (u FTRL[V]) Validate() error {
	return errors.Join(
		checkParam(NameFTRL, "alpha", u.Alpha, 0, false),
		checkParam(NameFTRL, "beta", u.Beta, 0, false),
		checkParam(NameFTRL, "l1", u.L1, 0, true),
		checkParam(NameFTRL, "l2", u.L2, 0, true),
	)
}

// weight returns the FTRL weight for state (z, n).
func (u FTRL[V]) weight(z, n float64) float64 {
	if math.Abs(z) <= u.L1 {
		return 0
	}
	// Beta > 0, so the denominator is positive.
	return -(z - math.Copysign(u.L1, z)) / ((u.Beta+math.Sqrt(n))/u.Alpha + u.L2)
}

// Apply performs one FTRL-Proximal step per coordinate.
func (u FTRL[V]) Apply(w, s, g []V) {
	g, s = g[:len(w)], s[:2*len(w)]
	for i := range w {
		z, n := float64(s[2*i]), float64(s[2*i+1])
		gi := float64(g[i])
		wOld := u.weight(z, n)
		nNew := n + gi*gi
		sigma := (math.Sqrt(nNew) - math.Sqrt(n)) / u.Alpha
		z += gi - sigma*wOld
		s[2*i], s[2*i+1] = V(z), V(nNew)
		// Recompute from the stored (rounded) state, so that w always
		// equals the weight a later Apply derives from the state.
		w[i] = V(u.weight(float64(V(z)), float64(V(nNew))))
	}
}

// Adam is the Adam optimizer (Kingma and Ba 2015) with bias correction,
// applied per coordinate. The state of each weight is (m, v, t):
//
//	t += 1
//	m = Beta1*m + (1-Beta1)*g
//	v = Beta2*v + (1-Beta2)*g²
//	w -= LR * (m / (1-Beta1^t)) / (sqrt(v / (1-Beta2^t)) + Eps)
//
// t counts the updates of each weight separately, since in a sparse model
// keys are pushed at different rates. Stored as float32, t stops counting at
// 2^24, where the bias corrections are 1 for any usual Beta1 and Beta2.
type Adam[V Number] struct {
	LR    float64 // learning rate, > 0; default 0.001
	Beta1 float64 // first-moment decay, in [0, 1); default 0.9
	Beta2 float64 // second-moment decay, in [0, 1); default 0.999
	Eps   float64 // added to the denominator, > 0; default 1e-8
}

// DefaultAdam returns Adam with LR 0.001, Beta1 0.9, Beta2 0.999 and Eps
// 1e-8.
func DefaultAdam[V Number]() Adam[V] {
	return Adam[V]{LR: 0.001, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Name returns "adam".
func (Adam[V]) Name() string { return NameAdam }

// StateWidth returns 3: m, v and t.
func (Adam[V]) StateWidth() int { return 3 }

// Validate checks that LR > 0, Eps > 0 and 0 <= Beta1, Beta2 < 1.
func (u Adam[V]) Validate() error {
	errs := []error{
		checkParam(NameAdam, "lr", u.LR, 0, false),
		checkParam(NameAdam, "eps", u.Eps, 0, false),
		checkParam(NameAdam, "beta1", u.Beta1, 0, true),
		checkParam(NameAdam, "beta2", u.Beta2, 0, true),
	}
	if u.Beta1 >= 1 {
		errs = append(errs, fmt.Errorf("%w: %s beta1 = %v, want < 1", ErrInvalidConfig, NameAdam, u.Beta1))
	}
	if u.Beta2 >= 1 {
		errs = append(errs, fmt.Errorf("%w: %s beta2 = %v, want < 1", ErrInvalidConfig, NameAdam, u.Beta2))
	}
	return errors.Join(errs...)
}

// Apply performs one Adam step per coordinate.
func (u Adam[V]) Apply(w, s, g []V) {
	g, s = g[:len(w)], s[:3*len(w)]
	// The coordinates of one key usually share t: compute the bias
	// corrections once per distinct t.
	lastT, c1, c2 := -1.0, 0.0, 0.0
	for i := range w {
		st := s[3*i : 3*i+3 : 3*i+3]
		gi := float64(g[i])
		m := u.Beta1*float64(st[0]) + (1-u.Beta1)*gi
		v := u.Beta2*float64(st[1]) + (1-u.Beta2)*gi*gi
		t := float64(V(float64(st[2]) + 1))
		if t != lastT {
			lastT = t
			c1 = 1 - math.Pow(u.Beta1, t)
			c2 = 1 - math.Pow(u.Beta2, t)
		}
		st[0], st[1], st[2] = V(m), V(v), V(t)
		w[i] = V(float64(w[i]) - u.LR*(m/c1)/(math.Sqrt(v/c2)+u.Eps))
	}
}
