package lr

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// InterceptKey is the key of the intercept (bias) weight. Every example
// has an implicit feature InterceptKey with value 1, which is not stored
// in its Keys; real features therefore use keys of at least 1.
const InterceptKey uint64 = 0

var (
	// ErrExample is wrapped by the errors returned for a malformed
	// example: a label other than 0 or 1, keys not sorted ascending and
	// unique, a key equal to InterceptKey, or Keys and Vals of different
	// lengths.
	ErrExample = errors.New("lr: invalid example")
	// ErrLength is wrapped by the errors returned when slices that must
	// be aligned have different lengths.
	ErrLength = errors.New("lr: length mismatch")
	// ErrKeys is wrapped by the errors of Gradient when keys does not
	// start with InterceptKey or lacks a key of the batch.
	ErrKeys = errors.New("lr: keys do not cover the batch")
)

// Example is one labelled, sparse example. Keys are sorted ascending and
// unique, none equal to InterceptKey; Vals[i] is the value of feature
// Keys[i]. Label is 0 or 1. Weight is the example's instance weight,
// which multiplies its loss and gradient in training (not the metrics
// of Evaluate); 0 means none, the example weighs 1.
type Example struct {
	Label  float32
	Weight float32
	Keys   []uint64
	Vals   []float32
}

// WeightOr1 is what ex weighs in training: its Weight, or 1.
func (ex *Example) WeightOr1() float64 {
	if ex.Weight == 0 {
		return 1
	}
	return float64(ex.Weight)
}

// Check validates the label, the weight and the lengths of ex, the i-th
// of its batch, with errors wrapping ErrExample. It does not check the
// keys' order.
func (ex *Example) Check(i int) error {
	if ex.Label != 0 && ex.Label != 1 {
		return fmt.Errorf("%w: example %d: label %v, want 0 or 1", ErrExample, i, ex.Label)
	}
	if w := float64(ex.Weight); !(w >= 0) || math.IsInf(w, 1) {
		return fmt.Errorf("%w: example %d: weight %v, want a finite number, 0 or more", ErrExample, i, ex.Weight)
	}
	if len(ex.Keys) != len(ex.Vals) {
		return fmt.Errorf("%w: example %d: %d keys and %d values", ErrExample, i, len(ex.Keys), len(ex.Vals))
	}
	return nil
}

// keyError describes the key at position j of example i that is not
// greater than its predecessor prev (or is InterceptKey when j is 0).
func keyError(i, j int, k, prev uint64) error {
	if k == InterceptKey {
		return fmt.Errorf("%w: example %d: feature id %d collides with the intercept key", ErrExample, i, k)
	}
	return fmt.Errorf("%w: example %d: key %d at position %d follows %d: keys must be sorted ascending and unique", ErrExample, i, k, j, prev)
}

// BatchKeys returns the sorted, unique keys of the examples of batch
// together with InterceptKey, which is therefore always the first. The
// result reuses dst's storage when it is large enough; BatchKeys also uses
// the spare capacity of dst as scratch space and grows it to twice the
// number of keys of the batch, so that passing the previous result back
// as dst makes later calls allocation-free.
//
// BatchKeys checks each example and returns an error wrapping ErrExample
// for a label other than 0 or 1, a weight below 0 or not finite, keys
// and values of different lengths, keys that are not strictly
// ascending, or a key equal to InterceptKey (a feature id 0 in libsvm
// data).
func BatchKeys(batch []Example, dst []uint64) ([]uint64, error) {
	n := 1
	for i := range batch {
		ex := &batch[i]
		if err := ex.Check(i); err != nil {
			return dst[:0], err
		}
		prev := InterceptKey
		for j, k := range ex.Keys {
			if k <= prev { // prev starts at InterceptKey, the smallest key
				return dst[:0], keyError(i, j, k, prev)
			}
			prev = k
		}
		n += len(ex.Keys)
	}
	dst = slices.Grow(dst[:0], 2*n)
	dst = append(dst, InterceptKey)
	for i := range batch {
		dst = append(dst, batch[i].Keys...)
	}
	sortKeys(dst, dst[n:2*n])
	return slices.Compact(dst), nil
}

// radixMin is the length from which sortKeys uses a radix sort.
const radixMin = 256

// sortKeys sorts keys ascending, using scratch (of the same length) as
// temporary space: an LSD radix sort on bytes, which skips the bytes in
// which all keys agree (the high bytes of small ids), and slices.Sort for
// short slices.
func sortKeys(keys, scratch []uint64) {
	if len(keys) < radixMin {
		slices.Sort(keys)
		return
	}
	var or, and uint64 = 0, ^uint64(0)
	for _, k := range keys {
		or |= k
		and &= k
	}
	varying := or ^ and // bits that differ between some keys
	src, dst := keys, scratch[:len(keys)]
	var count [256]int
	for shift := uint(0); shift < 64; shift += 8 {
		if (varying>>shift)&0xff == 0 {
			continue
		}
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&0xff]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, k := range src {
			d := (k >> shift) & 0xff
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// stackPositions is the longest example whose key positions Gradient
// remembers between its two passes; the positions of the keys of longer
// examples are searched for twice.
const stackPositions = 128

// Gradient computes the gradient of the log loss summed over the examples
// of batch, with respect to the weights w of keys, into grad, and returns
// the summed log loss. keys must be sorted ascending, start with
// InterceptKey and contain every key of batch, as BatchKeys returns them;
// w and grad must have the length of keys. grad is overwritten: grad[i] is
// Σ_examples weight·(Sigmoid(z) - y)·x[keys[i]], a sum and not a mean (see
// the package documentation), and the loss is weighted alike.
//
// Gradient returns an error wrapping ErrLength, ErrKeys or ErrExample if
// the arguments break these rules; grad is then unspecified. It does not
// allocate.
func Gradient(batch []Example, keys []uint64, w, grad []float32) (lossSum float64, err error) {
	if len(w) != len(keys) || len(grad) != len(keys) {
		return 0, fmt.Errorf("%w: %d keys, %d weights, %d gradients", ErrLength, len(keys), len(w), len(grad))
	}
	if len(keys) == 0 || keys[0] != InterceptKey {
		return 0, fmt.Errorf("%w: keys must start with the intercept key %d", ErrKeys, InterceptKey)
	}
	clear(grad)
	w0 := float64(w[0])
	var posBuf [stackPositions]int
	for i := range batch {
		ex := &batch[i]
		if err := ex.Check(i); err != nil {
			return 0, err
		}
		vals := ex.Vals[:len(ex.Keys)]
		pos := posBuf[:0]
		remember := len(ex.Keys) <= stackPositions
		z := w0
		lo, prev := 1, InterceptKey
		for j, k := range ex.Keys {
			if k <= prev { // prev starts at InterceptKey, the smallest key
				return 0, keyError(i, j, k, prev)
			}
			prev = k
			p := search(keys, lo, k)
			if p < 0 {
				return 0, fmt.Errorf("%w: key %d of example %d is missing", ErrKeys, k, i)
			}
			lo = p + 1
			if remember {
				pos = append(pos, p)
			}
			z += float64(w[p]) * float64(vals[j])
		}
		y, wt := float64(ex.Label), ex.WeightOr1()
		lossSum += wt * logLoss(z, y)
		d := wt * (Sigmoid(z) - y)
		grad[0] += float32(d)
		if remember {
			for j, p := range pos {
				grad[p] += float32(d * float64(vals[j]))
			}
			continue
		}
		lo = 1
		for j, k := range ex.Keys {
			p := search(keys, lo, k) // found in the first pass
			lo = p + 1
			grad[p] += float32(d * float64(vals[j]))
		}
	}
	return lossSum, nil
}

// search returns the index of k in the sorted keys[lo:], or -1.
func search(keys []uint64, lo int, k uint64) int {
	hi := len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if keys[m] < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(keys) && keys[lo] == k {
		return lo
	}
	return -1
}

// Sigmoid returns 1/(1+e^-z), computed without overflow for any z.
func Sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// logLoss returns the log loss of margin z for label y (0 or 1):
// log(1+e^-z) for y = 1 and log(1+e^z) for y = 0, computed as
// max(x,0) + log1p(e^-|x|), which is exact for large |z|.
func logLoss(z, y float64) float64 {
	x := z
	if y == 1 {
		x = -z
	}
	return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
}
