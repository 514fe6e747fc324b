package lr_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/examples/lr/lr"
)

func ex(label float32, keys []uint64, vals ...float32) lr.Example {
	if vals == nil {
		vals = make([]float32, len(keys))
		for i := range vals {
			vals[i] = 1
		}
	}
	return lr.Example{Label: label, Keys: keys, Vals: vals}
}

func TestBatchKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		batch   []lr.Example
		want    []uint64
		wantErr error
	}{
		{name: "empty batch", batch: nil, want: []uint64{0}},
		{name: "no features", batch: []lr.Example{ex(1, nil)}, want: []uint64{0}},
		{
			name:  "union sorted unique",
			batch: []lr.Example{ex(1, []uint64{5, 9}), ex(0, []uint64{1, 5, 100}), ex(0, []uint64{9})},
			want:  []uint64{0, 1, 5, 9, 100},
		},
		{name: "max key", batch: []lr.Example{ex(1, []uint64{math.MaxUint64})}, want: []uint64{0, math.MaxUint64}},
		{name: "feature id 0", batch: []lr.Example{ex(1, []uint64{0, 3})}, wantErr: lr.ErrExample},
		{name: "unsorted", batch: []lr.Example{ex(1, []uint64{3, 2})}, wantErr: lr.ErrExample},
		{name: "duplicate", batch: []lr.Example{ex(1, []uint64{2, 2})}, wantErr: lr.ErrExample},
		{name: "values short", batch: []lr.Example{{Label: 1, Keys: []uint64{1, 2}, Vals: []float32{1}}}, wantErr: lr.ErrExample},
		{name: "label -1", batch: []lr.Example{ex(-1, []uint64{1})}, wantErr: lr.ErrExample},
		{name: "label 0.5", batch: []lr.Example{ex(0.5, []uint64{1})}, wantErr: lr.ErrExample},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dst := make([]uint64, 0, 64)
			got, err := lr.BatchKeys(tt.batch, dst)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("BatchKeys error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("BatchKeys = %v, want %v", got, tt.want)
			}
			if &got[:1][0] != &dst[:1][0] {
				t.Error("BatchKeys did not reuse dst")
			}
		})
	}
}

// naiveGradient is Gradient by the book, in float64, with a map.
func naiveGradient(batch []lr.Example, w map[uint64]float64) (grad map[uint64]float64, loss float64) {
	grad = map[uint64]float64{}
	for _, e := range batch {
		z := w[lr.InterceptKey]
		for i, k := range e.Keys {
			z += w[k] * float64(e.Vals[i])
		}
		p := 1 / (1 + math.Exp(-z))
		y := float64(e.Label)
		loss += -y*math.Log(p) - (1-y)*math.Log(1-p)
		grad[lr.InterceptKey] += p - y
		for i, k := range e.Keys {
			grad[k] += (p - y) * float64(e.Vals[i])
		}
	}
	return grad, loss
}

// randomBatch returns n examples with up to maxLen keys from [1, space].
func randomBatch(rng *rand.Rand, n, maxLen int, space uint64) []lr.Example {
	batch := make([]lr.Example, n)
	for i := range batch {
		m := rng.IntN(maxLen + 1)
		var keys []uint64
		for len(keys) < m {
			k := 1 + rng.Uint64N(space)
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		vals := make([]float32, m)
		for j := range vals {
			vals[j] = float32(rng.NormFloat64())
		}
		batch[i] = lr.Example{Label: float32(rng.IntN(2)), Keys: keys, Vals: vals}
	}
	return batch
}

func TestGradientMatchesNaive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		n, maxLen    int
		space        uint64
		weightsScale float64
	}{
		{name: "small", n: 5, maxLen: 4, space: 10, weightsScale: 0.5},
		{name: "dense overlap", n: 50, maxLen: 30, space: 40, weightsScale: 0.3},
		{name: "sparse", n: 100, maxLen: 40, space: 1 << 40, weightsScale: 1},
		{name: "long examples", n: 10, maxLen: 300, space: 2000, weightsScale: 0.1},
		{name: "saturated margins", n: 20, maxLen: 10, space: 30, weightsScale: 20},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			batch := randomBatch(rng, tt.n, tt.maxLen, tt.space)
			keys, err := lr.BatchKeys(batch, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := make([]float32, len(keys))
			wm := map[uint64]float64{}
			for j, k := range keys {
				w[j] = float32(rng.NormFloat64() * tt.weightsScale)
				wm[k] = float64(w[j])
			}
			grad := make([]float32, len(keys))
			for j := range grad {
				grad[j] = 123 // must be overwritten
			}
			loss, err := lr.Gradient(batch, keys, w, grad)
			if err != nil {
				t.Fatal(err)
			}
			wantGrad, wantLoss := naiveGradient(batch, wm)
			if !math.IsInf(wantLoss, 0) && math.Abs(loss-wantLoss) > 1e-9*max(1, wantLoss) {
				t.Errorf("loss = %v, want %v", loss, wantLoss)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				t.Errorf("loss = %v, want finite", loss)
			}
			for j, k := range keys {
				if d := math.Abs(float64(grad[j]) - wantGrad[k]); d > 1e-5*max(1, math.Abs(wantGrad[k])) {
					t.Errorf("grad[key %d] = %v, want %v", k, grad[j], wantGrad[k])
				}
			}
		})
	}
}

// randomProblem is a random batch (randomBatch's arguments), its keys
// and random weights for them.
func randomProblem(t *testing.T, rng *rand.Rand, n, maxLen int, space uint64) ([]lr.Example, []uint64, []float32) {
	t.Helper()
	batch := randomBatch(rng, n, maxLen, space)
	keys, err := lr.BatchKeys(batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, len(keys))
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.5)
	}
	return batch, keys, w
}

// TestGradientFiniteDifference checks the gradient against central
// differences of the loss, which also checks the loss.
func TestGradientFiniteDifference(t *testing.T) {
	t.Parallel()
	batch, keys, w := randomProblem(t, rand.New(rand.NewPCG(3, 4)), 20, 8, 15)
	grad := make([]float32, len(keys))
	if _, err := lr.Gradient(batch, keys, w, grad); err != nil {
		t.Fatal(err)
	}
	scratch := make([]float32, len(keys))
	lossAt := func(i int, delta float32) float64 {
		wd := slices.Clone(w)
		wd[i] += delta
		l, err := lr.Gradient(batch, keys, wd, scratch)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	const h = 1e-2
	for i := range keys {
		fd := (lossAt(i, h) - lossAt(i, -h)) / (2 * h)
		if math.Abs(fd-float64(grad[i])) > 1e-3*max(1, math.Abs(fd)) {
			t.Errorf("key %d: gradient %v, finite difference %v", keys[i], grad[i], fd)
		}
	}
}

func TestGradientErrors(t *testing.T) {
	t.Parallel()
	good := []lr.Example{ex(1, []uint64{1, 4}), ex(0, []uint64{2})}
	keys := []uint64{0, 1, 2, 4}
	tests := []struct {
		name    string
		batch   []lr.Example
		keys    []uint64
		nw, ng  int
		wantErr error
	}{
		{name: "short weights", batch: good, keys: keys, nw: 3, ng: 4, wantErr: lr.ErrLength},
		{name: "short gradient", batch: good, keys: keys, nw: 4, ng: 5, wantErr: lr.ErrLength},
		{name: "no keys", batch: good, keys: nil, wantErr: lr.ErrKeys},
		{name: "no intercept", batch: good, keys: []uint64{1, 2, 4}, nw: 3, ng: 3, wantErr: lr.ErrKeys},
		{name: "missing key", batch: good, keys: []uint64{0, 1, 4}, nw: 3, ng: 3, wantErr: lr.ErrKeys},
		{name: "unsorted example", batch: []lr.Example{ex(1, []uint64{4, 1})}, keys: keys, nw: 4, ng: 4, wantErr: lr.ErrExample},
		{name: "feature id 0", batch: []lr.Example{ex(1, []uint64{0})}, keys: keys, nw: 4, ng: 4, wantErr: lr.ErrExample},
		{name: "bad label", batch: []lr.Example{ex(2, []uint64{1})}, keys: keys, nw: 4, ng: 4, wantErr: lr.ErrExample},
		{name: "values short", batch: []lr.Example{{Label: 1, Keys: []uint64{1}}}, keys: keys, nw: 4, ng: 4, wantErr: lr.ErrExample},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := lr.Gradient(tt.batch, tt.keys, make([]float32, tt.nw), make([]float32, tt.ng))
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Gradient error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestGradientNoAlloc(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	batch := randomBatch(rng, 100, 40, 1000)
	keys, err := lr.BatchKeys(batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, grad := make([]float32, len(keys)), make([]float32, len(keys))
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := lr.Gradient(batch, keys, w, grad); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Gradient allocates %v times per call, want 0", allocs)
	}
}

func TestSigmoid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		z    float64
		want float64
	}{
		{name: "zero", z: 0, want: 0.5},
		{name: "one", z: 1, want: 1 / (1 + math.Exp(-1))},
		{name: "minus one", z: -1, want: math.Exp(-1) / (1 + math.Exp(-1))},
		{name: "large", z: 800, want: 1},
		{name: "very negative", z: -800, want: 0},
		{name: "tiny tail", z: -700, want: math.Exp(-700)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := lr.Sigmoid(tt.z); math.Abs(got-tt.want) > 1e-15*max(tt.want, 1e-300) && got != tt.want {
				t.Errorf("Sigmoid(%v) = %v, want %v", tt.z, got, tt.want)
			}
		})
	}
}

func TestLogLoss(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		margins []float64
		labels  []float32
		want    float64
		wantErr error
	}{
		{name: "even", margins: []float64{0, 0}, labels: []float32{0, 1}, want: math.Ln2},
		{name: "confident right", margins: []float64{800, -800}, labels: []float32{1, 0}, want: 0},
		{name: "confident wrong", margins: []float64{800, -800}, labels: []float32{0, 1}, want: 800},
		{name: "moderate", margins: []float64{2}, labels: []float32{0}, want: math.Log(1 + math.Exp(2))},
		{name: "mismatch", margins: []float64{1}, labels: nil, wantErr: lr.ErrLength},
		{name: "bad label", margins: []float64{1}, labels: []float32{-1}, wantErr: lr.ErrExample},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := lr.LogLoss(tt.margins, tt.labels)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("LogLoss error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && math.Abs(got-tt.want) > 1e-12*max(1, tt.want) {
				t.Errorf("LogLoss = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := lr.LogLoss(nil, nil); err == nil {
		t.Error("LogLoss of no examples: no error")
	}
}

// naiveAUC counts the pairs.
func naiveAUC(scores []float64, labels []float32) float64 {
	var won float64
	var pairs int
	for i := range scores {
		for j := range scores {
			if labels[i] != 1 || labels[j] != 0 {
				continue
			}
			pairs++
			switch {
			case scores[i] > scores[j]:
				won++
			case scores[i] == scores[j]:
				won += 0.5
			}
		}
	}
	return won / float64(pairs)
}

func TestAUC(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		scores  []float64
		labels  []float32
		want    float64
		wantErr bool
	}{
		{name: "perfect", scores: []float64{0.1, 0.2, 0.8, 0.9}, labels: []float32{0, 0, 1, 1}, want: 1},
		{name: "reversed", scores: []float64{0.1, 0.2, 0.8, 0.9}, labels: []float32{1, 1, 0, 0}, want: 0},
		{name: "all tied", scores: []float64{3, 3, 3, 3, 3}, labels: []float32{0, 1, 0, 1, 1}, want: 0.5},
		// Pairs (pos, neg): (2,1) won, (2,2) tie, (2,3) lost, (5,1) won,
		// (5,2) won, (5,3) won: 4.5 of 6.
		{name: "ties", scores: []float64{1, 2, 2, 3, 5}, labels: []float32{0, 0, 1, 0, 1}, want: 4.5 / 6},
		{name: "infinities", scores: []float64{math.Inf(-1), math.Inf(1)}, labels: []float32{0, 1}, want: 1},
		{name: "one class", scores: []float64{1, 2}, labels: []float32{1, 1}, wantErr: true},
		{name: "empty", wantErr: true},
		{name: "NaN", scores: []float64{1, math.NaN()}, labels: []float32{0, 1}, wantErr: true},
		{name: "mismatch", scores: []float64{1, 2}, labels: []float32{0}, wantErr: true},
		{name: "bad label", scores: []float64{1, 2}, labels: []float32{0, 2}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := lr.AUC(tt.scores, tt.labels)
			if (err != nil) != tt.wantErr {
				t.Fatalf("AUC error = %v, want error %v", err, tt.wantErr)
			}
			if err == nil && math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("AUC = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAUCMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		n := 2 + rng.IntN(300)
		scores := make([]float64, n)
		labels := make([]float32, n)
		levels := 1 + rng.IntN(20) // few levels: many ties
		for i := range scores {
			scores[i] = float64(rng.IntN(levels))
			labels[i] = float32(rng.IntN(2))
		}
		labels[0], labels[1] = 0, 1
		got, err := lr.AUC(scores, labels)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveAUC(scores, labels); math.Abs(got-want) > 1e-12 {
			t.Fatalf("AUC = %v, naive %v (n %d, levels %d)", got, want, n, levels)
		}
	}
}

func TestModel(t *testing.T) {
	t.Parallel()
	m := lr.Model{Keys: []uint64{0, 2, 7}, W: []float32{-1, 2, 0.5}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  uint64
		want float32
	}{{0, -1}, {1, 0}, {2, 2}, {7, 0.5}, {8, 0}} {
		if got := m.Lookup(tc.key); got != tc.want {
			t.Errorf("Lookup(%d) = %v, want %v", tc.key, got, tc.want)
		}
	}
	e := ex(1, []uint64{2, 5, 7}, 1, 3, 2)
	if got, want := lr.Score(e, m.Lookup), -1+2+0+1.0; got != want {
		t.Errorf("Score = %v, want %v", got, want)
	}
	if got := m.NonZero(); got != 3 {
		t.Errorf("NonZero = %d, want 3", got)
	}
	examples := []lr.Example{ex(1, []uint64{2}), ex(0, []uint64{7}), ex(0, nil)}
	auc, ll, err := m.Evaluate(examples)
	if err != nil {
		t.Fatal(err)
	}
	// Margins 1, -0.5, -1 for labels 1, 0, 0.
	wantLL := (math.Log1p(math.Exp(-1)) + math.Log1p(math.Exp(-0.5)) + math.Log1p(math.Exp(-1))) / 3
	if auc != 1 || math.Abs(ll-wantLL) > 1e-12 {
		t.Errorf("Evaluate = %v, %v, want 1, %v", auc, ll, wantLL)
	}
	bad := []lr.Model{
		{Keys: []uint64{1, 2}, W: []float32{1}},
		{Keys: []uint64{2, 1}, W: []float32{1, 1}},
		{Keys: []uint64{1, 1}, W: []float32{1, 1}},
	}
	for _, b := range bad {
		if err := b.Validate(); err == nil {
			t.Errorf("Validate(%v): no error", b)
		}
		if _, _, err := b.Evaluate(examples); err == nil {
			t.Errorf("Evaluate with %v: no error", b)
		}
	}
	if _, _, err := m.Evaluate([]lr.Example{ex(1, nil), ex(1, nil)}); err == nil {
		t.Error("Evaluate with one class: no error")
	}
}

// TestBatchKeysLarge checks BatchKeys, including its radix sort, against
// a plain sort, on batches of random keys with varying spreads.
func TestBatchKeysLarge(t *testing.T) {
	// Not parallel: AllocsPerRun.
	tests := []struct {
		name  string
		n     int
		space uint64
	}{
		{name: "below radix threshold", n: 10, space: 1000},
		{name: "small ids", n: 100, space: 1000},
		{name: "20-bit ids", n: 200, space: 1 << 20},
		{name: "64-bit ids", n: 200, space: math.MaxUint64 - 1},
		{name: "high bits only", n: 100, space: 4},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			batch := randomBatch(rng, tt.n, int(min(40, tt.space)), tt.space)
			if tt.name == "high bits only" {
				for _, e := range batch {
					for j := range e.Keys {
						e.Keys[j] <<= 60
					}
				}
			}
			want := []uint64{lr.InterceptKey}
			for _, e := range batch {
				want = append(want, e.Keys...)
			}
			slices.Sort(want)
			want = slices.Compact(want)
			var dst []uint64
			for range 2 { // the second call reuses dst
				got, err := lr.BatchKeys(batch, dst)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("BatchKeys: %d keys, want %d, or different ones", len(got), len(want))
				}
				dst = got
			}
			if allocs := testing.AllocsPerRun(5, func() { dst, _ = lr.BatchKeys(batch, dst) }); allocs != 0 {
				t.Errorf("BatchKeys reusing its result allocates %v times", allocs)
			}
		})
	}
}

// TestGradientWeights: an example of weight k counts as k copies of it in
// the loss and the gradient; a weight of 1 is no weight at all, to the
// bit; a negative, NaN or infinite weight is refused.
func TestGradientWeights(t *testing.T) {
	t.Parallel()
	batch, keys, w := randomProblem(t, rand.New(rand.NewPCG(5, 6)), 30, 8, 25)
	gradient := func(batch []lr.Example) ([]float32, float64) {
		t.Helper()
		g := make([]float32, len(keys))
		loss, err := lr.Gradient(batch, keys, w, g)
		if err != nil {
			t.Fatal(err)
		}
		return g, loss
	}
	plain, plainLoss := gradient(batch)
	ones := slices.Clone(batch)
	for i := range ones {
		ones[i].Weight = 1
	}
	if g, loss := gradient(ones); !slices.Equal(g, plain) || loss != plainLoss {
		t.Errorf("weights of 1 changed the gradient or the loss (%v against %v)", loss, plainLoss)
	}

	weighted := slices.Clone(batch)
	var copies []lr.Example
	for i := range weighted {
		k := 1 + i%3
		weighted[i].Weight = float32(k)
		for range k {
			copies = append(copies, batch[i])
		}
	}
	g, loss := gradient(weighted)
	wantG, wantLoss := gradient(copies)
	if math.Abs(loss-wantLoss) > 1e-9*wantLoss {
		t.Errorf("weighted loss %v, want %v (the examples repeated as often as they weigh)", loss, wantLoss)
	}
	for i := range g {
		if math.Abs(float64(g[i]-wantG[i])) > 1e-5*max(1, math.Abs(float64(wantG[i]))) {
			t.Errorf("key %d: weighted gradient %v, want %v", keys[i], g[i], wantG[i])
		}
	}

	for _, bad := range []float32{-1, float32(math.NaN()), float32(math.Inf(1))} {
		b := []lr.Example{ex(1, []uint64{1})}
		b[0].Weight = bad
		if _, err := lr.Gradient(b, []uint64{0, 1}, make([]float32, 2), make([]float32, 2)); !errors.Is(err, lr.ErrExample) {
			t.Errorf("weight %v: %v, want %v", bad, err, lr.ErrExample)
		}
	}
}
