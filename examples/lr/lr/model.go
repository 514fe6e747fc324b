package lr

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Score returns the margin (log-odds) of ex under the weights that lookup
// returns: lookup(InterceptKey) + Σ lookup(Keys[i])·Vals[i]. Sigmoid of
// the score is the predicted probability of label 1. Score trusts ex: a
// Vals shorter than Keys panics.
func Score(ex Example, lookup func(key uint64) float32) float64 {
	z := float64(lookup(InterceptKey))
	for i, k := range ex.Keys {
		z += float64(lookup(k)) * float64(ex.Vals[i])
	}
	return z
}

// checkLabels returns an error unless labels has n entries, all 0 or 1,
// and the number of 1s.
func checkLabels(n int, labels []float32) (positives int, err error) {
	if len(labels) != n {
		return 0, fmt.Errorf("%w: %d scores and %d labels", ErrLength, n, len(labels))
	}
	for i, y := range labels {
		switch y {
		case 0:
		case 1:
			positives++
		default:
			return 0, fmt.Errorf("%w: label %d is %v, want 0 or 1", ErrExample, i, y)
		}
	}
	return positives, nil
}

// AUC returns the exact area under the ROC curve of scores for labels (0
// or 1): the probability that a random positive scores above a random
// negative, a tie counting 1/2. It sorts a copy of the scores, O(n log n).
// Any monotone transform of the scores (margins or probabilities) gives the
// same AUC.
//
// AUC returns an error wrapping ErrLength if the slices differ in length,
// ErrExample for a label other than 0 or 1, and an error if a score is NaN
// or the labels are all equal, which leaves the AUC undefined.
func AUC(scores []float64, labels []float32) (float64, error) {
	pos, err := checkLabels(len(scores), labels)
	if err != nil {
		return 0, err
	}
	neg := len(scores) - pos
	if pos == 0 || neg == 0 {
		return 0, fmt.Errorf("lr: auc undefined for %d positives and %d negatives", pos, neg)
	}
	type scored struct {
		s   float64
		pos bool
	}
	all := make([]scored, len(scores))
	for i, s := range scores {
		if math.IsNaN(s) {
			return 0, fmt.Errorf("lr: auc: score %d is NaN", i)
		}
		all[i] = scored{s, labels[i] == 1}
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(a.s, b.s) })
	// Walk groups of equal scores in ascending order. Each positive beats
	// the negatives of lower groups and ties with those of its own.
	// twice counts the pairs won twice, plus the tied pairs once, exactly.
	var twice, negBelow uint64
	for i := 0; i < len(all); {
		var p, n uint64
		j := i
		for ; j < len(all) && all[j].s == all[i].s; j++ {
			if all[j].pos {
				p++
			} else {
				n++
			}
		}
		twice += 2*p*negBelow + p*n
		negBelow += n
		i = j
	}
	return float64(twice) / 2 / (float64(pos) * float64(neg)), nil
}

// LogLoss returns the mean log loss of margins for labels (0 or 1), where
// margins are log-odds as Score returns them, not probabilities. It is
// computed from the margins directly, so that confident predictions keep
// their precision. It returns an error wrapping ErrLength or ErrExample
// for mismatched lengths or a bad label, and an error for no examples.
func LogLoss(margins []float64, labels []float32) (float64, error) {
	if _, err := checkLabels(len(margins), labels); err != nil {
		return 0, err
	}
	if len(margins) == 0 {
		return 0, fmt.Errorf("lr: log loss of no examples")
	}
	var sum float64
	for i, z := range margins {
		sum += logLoss(z, float64(labels[i]))
	}
	return sum / float64(len(margins)), nil
}

// Model is a trained model for evaluation: weights W[i] of Keys[i], with
// Keys sorted ascending and unique and len(W) == len(Keys). A key that is
// absent has weight 0. The intercept is the weight of InterceptKey.
type Model struct {
	Keys []uint64
	W    []float32
}

// Validate returns an error wrapping ErrLength if Keys and W differ in
// length, and an error if Keys are not sorted ascending and unique.
func (m Model) Validate() error {
	if len(m.Keys) != len(m.W) {
		return fmt.Errorf("%w: model has %d keys and %d weights", ErrLength, len(m.Keys), len(m.W))
	}
	for i := 1; i < len(m.Keys); i++ {
		if m.Keys[i] <= m.Keys[i-1] {
			return fmt.Errorf("lr: model key %d at position %d follows %d: keys must be sorted ascending and unique", m.Keys[i], i, m.Keys[i-1])
		}
	}
	return nil
}

// Lookup returns the weight of key by binary search, or 0 if key is
// absent. m must be valid (see Validate).
func (m Model) Lookup(key uint64) float32 {
	i, ok := slices.BinarySearch(m.Keys, key)
	if !ok {
		return 0
	}
	return m.W[i]
}

// NonZero returns the number of weights that are not 0.
func (m Model) NonZero() int {
	n := 0
	for _, w := range m.W {
		if w != 0 {
			n++
		}
	}
	return n
}

// Evaluate returns the AUC and the mean log loss of m on examples. It
// returns an error if m is invalid, an example is malformed (wrapping
// ErrExample), or the AUC is undefined because all labels are equal.
func (m Model) Evaluate(examples []Example) (auc, logloss float64, err error) {
	if err := m.Validate(); err != nil {
		return 0, 0, err
	}
	margins := make([]float64, len(examples))
	labels := make([]float32, len(examples))
	for i := range examples {
		ex := &examples[i]
		if err := ex.Check(i); err != nil {
			return 0, 0, err
		}
		margins[i] = Score(*ex, m.Lookup)
		labels[i] = ex.Label
	}
	if logloss, err = LogLoss(margins, labels); err != nil {
		return 0, 0, err
	}
	if auc, err = AUC(margins, labels); err != nil {
		return 0, 0, err
	}
	return auc, logloss, nil
}
