package fm

import (
	"errors"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/psnode/store"
)

// randomBatch returns n examples over feature ids 1..ids with real
// values, so that x² terms matter; every third example has an instance
// weight other than 1.
func randomBatch(rng *rand.Rand, n, ids int) []lr.Example {
	batch := make([]lr.Example, n)
	for i := range batch {
		k := 1 + rng.Intn(6)
		set := map[uint64]bool{}
		for len(set) < k {
			set[uint64(1+rng.Intn(ids))] = true
		}
		ex := lr.Example{Label: float32(rng.Intn(2))}
		if i%3 == 2 {
			ex.Weight = 0.25 + 3*rng.Float32()
		}
		for key := range set {
			ex.Keys = append(ex.Keys, key)
		}
		slices.Sort(ex.Keys)
		for range ex.Keys {
			ex.Vals = append(ex.Vals, float32(rng.NormFloat64()))
		}
		batch[i] = ex
	}
	return batch
}

// batchLoss is the summed log loss of batch under w and v, each
// example's weighted by its instance weight, straight from the
// definition of the model (pairwise interactions, no algebraic
// rewriting), in float64.
func batchLoss(c Config, batch []lr.Example, keys []uint64, w, v []float64) float64 {
	d := c.Dim
	idx := func(k uint64) int { i, _ := slices.BinarySearch(keys, k); return i }
	var sum float64
	for _, ex := range batch {
		z := 0.0
		if c.Bias {
			z = w[0]
		}
		for j, k := range ex.Keys {
			z += w[idx(k)] * float64(ex.Vals[j])
		}
		for a := range ex.Keys {
			for b := a + 1; b < len(ex.Keys); b++ {
				pa, pb := idx(ex.Keys[a]), idx(ex.Keys[b])
				var dot float64
				for f := range d {
					dot += v[(pa-1)*d+f] * v[(pb-1)*d+f]
				}
				z += dot * float64(ex.Vals[a]) * float64(ex.Vals[b])
			}
		}
		p := 1 / (1 + math.Exp(-z))
		weight := ex.WeightOr1()
		if ex.Label == 1 {
			sum -= weight * math.Log(p)
		} else {
			sum -= weight * math.Log(1-p)
		}
	}
	return sum
}

func to64(s []float32) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = float64(x)
	}
	return out
}

// TestGradientMatchesFiniteDifferences checks every coordinate of the
// gradient against central differences of the loss computed from the
// pairwise definition of the model, with and without a bias.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	for _, bias := range []bool{true, false} {
		for _, dim := range []int{1, 3, 8} {
			c := Config{Dim: dim, Bias: bias, InitScale: 0.3}
			rng := rand.New(rand.NewSource(int64(dim)))
			batch := randomBatch(rng, 12, 15)
			keys, err := lr.BatchKeys(batch, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := make([]float32, len(keys))
			for i := range w {
				w[i] = float32(rng.NormFloat64() * 0.5)
			}
			v := make([]float32, (len(keys)-1)*dim)
			for i, k := range FeatureKeys(keys) {
				Init(k, v[i*dim:(i+1)*dim], c.InitScale)
			}
			gw, gv := make([]float32, len(w)), make([]float32, len(v))
			loss, err := c.Gradient(batch, keys, w, v, gw, gv)
			if err != nil {
				t.Fatal(err)
			}
			w64, v64 := to64(w), to64(v)
			if want := batchLoss(c, batch, keys, w64, v64); math.Abs(loss-want) > 1e-5*math.Max(1, want) {
				t.Errorf("bias %v dim %d: loss %v, the definition gives %v", bias, dim, loss, want)
			}
			const h = 1e-5
			numeric := func(p []float64, i int) float64 {
				old := p[i]
				p[i] = old + h
				up := batchLoss(c, batch, keys, w64, v64)
				p[i] = old - h
				down := batchLoss(c, batch, keys, w64, v64)
				p[i] = old
				return (up - down) / (2 * h)
			}
			checked := 0
			for i := range w64 {
				want := numeric(w64, i)
				if !bias && i == 0 {
					want = 0 // w0 is not in the model
				}
				if got := float64(gw[i]); math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
					t.Errorf("bias %v dim %d: ∂/∂w[%d] = %v, finite differences %v", bias, dim, keys[i], got, want)
				}
				checked++
			}
			nonzero := 0
			for i := range v64 {
				want := numeric(v64, i)
				if got := float64(gv[i]); math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
					t.Errorf("bias %v dim %d: ∂/∂v[%d][%d] = %v, finite differences %v", bias, dim, keys[1+i/dim], i%dim, got, want)
				}
				if math.Abs(want) > 1e-3 {
					nonzero++
				}
				checked++
			}
			// The test can only fail if the interactions carry gradient.
			if nonzero < len(v64)/2 {
				t.Errorf("bias %v dim %d: only %d of %d embedding gradients are nonzero", bias, dim, nonzero, len(v64))
			}
		}
	}
}

func TestGradientErrors(t *testing.T) {
	c := DefaultConfig()
	good := []lr.Example{{Label: 1, Keys: []uint64{3, 5}, Vals: []float32{1, 1}}}
	keys := []uint64{0, 3, 5}
	mk := func(n int) []float32 { return make([]float32, n) }
	tests := []struct {
		name   string
		batch  []lr.Example
		keys   []uint64
		w, v   int
		target error
	}{
		{"no intercept key", good, []uint64{3, 5}, 2, 16, lr.ErrKeys},
		{"missing key", good, []uint64{0, 3}, 2, 8, lr.ErrKeys},
		{"short weights", good, keys, 2, 16, lr.ErrLength},
		{"short embeddings", good, keys, 3, 15, lr.ErrLength},
		{"bad label", []lr.Example{{Label: 2, Keys: []uint64{3}, Vals: []float32{1}}}, keys, 3, 16, lr.ErrExample},
		{"unsorted keys", []lr.Example{{Label: 1, Keys: []uint64{5, 3}, Vals: []float32{1, 1}}}, keys, 3, 16, lr.ErrExample},
		{"intercept key in example", []lr.Example{{Label: 1, Keys: []uint64{0, 3}, Vals: []float32{1, 1}}}, keys, 3, 16, lr.ErrExample},
		{"values short", []lr.Example{{Label: 1, Keys: []uint64{3, 5}, Vals: []float32{1}}}, keys, 3, 16, lr.ErrExample},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Gradient(tt.batch, tt.keys, mk(tt.w), mk(tt.v), mk(tt.w), mk(tt.v))
			if !errors.Is(err, tt.target) {
				t.Errorf("error %v, want one wrapping %v", err, tt.target)
			}
		})
	}
	if _, err := c.Gradient(good, keys, mk(3), mk(16), mk(3), mk(16)); err != nil {
		t.Errorf("valid arguments: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    Config
	}{
		{"dim 0", Config{Dim: 0, InitScale: 0.01}},
		{"dim too large", Config{Dim: MaxDim + 1, InitScale: 0.01}},
		{"init scale 0", Config{Dim: 8}},
		{"init scale NaN", Config{Dim: 8, InitScale: math.NaN()}},
		{"init scale infinite", Config{Dim: 8, InitScale: math.Inf(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.c.Validate(); !errors.Is(err, ErrConfig) {
				t.Errorf("Validate: %v, want ErrConfig", err)
			}
		})
	}
}

// TestInit: a key's embedding depends on the key alone, lies in the
// range, differs between keys and between factors, and is centred.
func TestInit(t *testing.T) {
	const scale = 0.05
	a, b := make([]float32, 8), make([]float32, 8)
	seen := map[float32]bool{}
	var sum float64
	n := 0
	for k := uint64(0); k < 2000; k++ {
		Init(k, a, scale)
		Init(k, b, scale)
		if !slices.Equal(a, b) {
			t.Fatalf("key %d: two inits differ: %v and %v", k, a, b)
		}
		for _, x := range a {
			if x < -scale || x >= scale {
				t.Fatalf("key %d: value %v outside [-%v, %v)", k, x, scale, scale)
			}
			seen[x] = true
			sum += float64(x)
			n++
		}
	}
	if len(seen) < n*99/100 {
		t.Errorf("only %d distinct values among %d", len(seen), n)
	}
	if mean := sum / float64(n); math.Abs(mean) > scale/20 {
		t.Errorf("mean %v, want about 0", mean)
	}
}

// naiveAUC counts, over every positive-negative pair, the wins of the
// positive and half its ties.
func naiveAUC(scores []float64, labels []float32) float64 {
	var win float64
	var pairs int
	for i := range scores {
		for j := range scores {
			if labels[i] != 1 || labels[j] != 0 {
				continue
			}
			pairs++
			switch {
			case scores[i] > scores[j]:
				win++
			case scores[i] == scores[j]:
				win += 0.5
			}
		}
	}
	return win / float64(pairs)
}

// TestEvaluateMatchesNaive compares Evaluate with a naive pairwise AUC
// and a direct log loss over margins computed from the pairwise
// definition of the model, on a model trained briefly (so that weights
// and embeddings matter) with some scores tied.
func TestEvaluateMatchesNaive(t *testing.T) {
	cfg := gen.Default()
	cfg.Rows, cfg.Features, cfg.Informative = 3000, 500, 200
	train, err := gen.Examples(cfg)
	if err != nil {
		t.Fatal(err)
	}
	test, err := gen.Examples(cfg.TestSet(600))
	if err != nil {
		t.Fatal(err)
	}
	// Duplicates tie by construction.
	test = append(test, test[:50]...)
	c := Config{Dim: 4, Bias: true, InitScale: 0.1}
	l := newLocal(t, c, "adagrad", map[string]float64{"lr": 0.05}, map[string]float64{"lr": 0.02})
	if _, err := l.Epoch(train, 50); err != nil {
		t.Fatal(err)
	}
	m := l.Model()
	auc, logloss, err := m.Evaluate(test)
	if err != nil {
		t.Fatal(err)
	}
	margins := make([]float64, len(test))
	labels := make([]float32, len(test))
	var ll float64
	for i, ex := range test {
		keys, _ := lr.BatchKeys([]lr.Example{ex}, nil)
		w := make([]float64, len(keys))
		v := make([]float64, 0, (len(keys)-1)*c.Dim)
		emb := make([]float32, c.Dim)
		for j, k := range keys {
			w[j] = float64(m.Weight(k))
			if j > 0 {
				m.Embedding(k, emb)
				v = append(v, to64(emb)...)
			}
		}
		one := batchLoss(c, []lr.Example{ex}, keys, w, v)
		ll += one
		// The margin from the loss: p = e^-loss for a positive.
		p := math.Exp(-one)
		if ex.Label == 0 {
			p = 1 - p
		}
		margins[i] = math.Log(p / (1 - p))
		labels[i] = ex.Label
		if got := m.Score(ex); math.Abs(got-margins[i]) > 1e-6 {
			t.Fatalf("example %d: Score %v, the definition gives %v", i, got, margins[i])
		}
		margins[i] = m.Score(ex) // exact ties stay ties
	}
	if want := naiveAUC(margins, labels); math.Abs(auc-want) > 1e-12 {
		t.Errorf("AUC %v, naive %v", auc, want)
	}
	if want := ll / float64(len(test)); math.Abs(logloss-want) > 1e-9 {
		t.Errorf("log loss %v, direct %v", logloss, want)
	}
	if auc < 0.6 {
		t.Errorf("AUC %v after an epoch: the model did not learn, so the comparison proves little", auc)
	}
	var interaction bool
	for _, x := range m.V {
		if math.Abs(float64(x)) > 0.11 {
			interaction = true
		}
	}
	if !interaction {
		t.Errorf("no embedding moved beyond its initial range: the interactions were not exercised")
	}
}

func newLocal(t *testing.T, c Config, vUpdater string, wParams, vParams map[string]float64) *Local {
	t.Helper()
	wu, err := store.NewUpdater[float32]("adagrad", wParams)
	if err != nil {
		t.Fatal(err)
	}
	vu, err := store.NewUpdater[float32](vUpdater, vParams)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(c, wu, vu)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestModelValidateAndNewModel(t *testing.T) {
	c := Config{Dim: 2, Bias: true, InitScale: 0.01}
	m, err := NewModel(c, []uint64{5, 0, 3}, []float32{0.5, 0.1, 0.3}, []uint64{5, 3}, []float32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.WKeys, []uint64{0, 3, 5}) || !slices.Equal(m.W, []float32{0.1, 0.3, 0.5}) {
		t.Errorf("weights %v %v", m.WKeys, m.W)
	}
	if !slices.Equal(m.VKeys, []uint64{3, 5}) || !slices.Equal(m.V, []float32{3, 4, 1, 2}) {
		t.Errorf("embeddings %v %v", m.VKeys, m.V)
	}
	// ŷ of x3 = x5 = 1: 0.1 + 0.3 + 0.5 + <(3,4),(1,2)> = 0.9 + 11.
	if got := m.Score(lr.Example{Label: 1, Keys: []uint64{3, 5}, Vals: []float32{1, 1}}); math.Abs(got-11.9) > 1e-6 {
		t.Errorf("score %v, want 11.9", got)
	}
	// An absent key has its initial embedding.
	emb, want := make([]float32, 2), make([]float32, 2)
	m.Embedding(7, emb)
	Init(7, want, c.InitScale)
	if !slices.Equal(emb, want) {
		t.Errorf("embedding of an absent key %v, want its init %v", emb, want)
	}
	if _, err := NewModel(c, []uint64{1, 1}, []float32{1, 2}, nil, nil); err == nil {
		t.Error("a key twice in the weights was accepted")
	}
	if _, err := NewModel(c, []uint64{1}, []float32{1}, []uint64{1}, []float32{1}); !errors.Is(err, lr.ErrLength) {
		t.Errorf("one value for a 2-wide embedding: %v, want ErrLength", err)
	}
}

// TestLocalLearnsLikeLR: on the generated data, with tiny embeddings
// the machine is nearly a logistic regression, and reaches its test AUC.
func TestLocalLearnsLikeLR(t *testing.T) {
	cfg := gen.Default()
	cfg.Rows = 20000
	train, err := gen.Examples(cfg)
	if err != nil {
		t.Fatal(err)
	}
	test, err := gen.Examples(cfg.TestSet(5000))
	if err != nil {
		t.Fatal(err)
	}
	ftrl, err := store.NewUpdater[float32]("ftrl", lr.DefaultFTRLParams())
	if err != nil {
		t.Fatal(err)
	}
	base, err := lr.NewLocal(ftrl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.Epoch(train, 100); err != nil {
		t.Fatal(err)
	}
	lrAUC, _, err := base.Model().Evaluate(test)
	if err != nil {
		t.Fatal(err)
	}
	ftrl2, _ := store.NewUpdater[float32]("ftrl", lr.DefaultFTRLParams())
	ada, _ := store.NewUpdater[float32]("adagrad", map[string]float64{"lr": 0.001, "l2": 1})
	l, err := NewLocal(DefaultConfig(), ftrl2, ada)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Epoch(train, 100); err != nil {
		t.Fatal(err)
	}
	auc, _, err := l.Model().Evaluate(test)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("test AUC: fm %.4f, lr %.4f", auc, lrAUC)
	if auc < lrAUC-0.002 {
		t.Errorf("fm's test AUC %.4f is below lr's %.4f", auc, lrAUC)
	}
	// A malformed batch changes nothing.
	before := l.Model()
	if _, err := l.Step([]lr.Example{{Label: 3, Keys: []uint64{1}, Vals: []float32{1}}}); !errors.Is(err, lr.ErrExample) {
		t.Errorf("malformed batch: %v", err)
	}
	after := l.Model()
	if !slices.Equal(before.W, after.W) || !slices.Equal(before.V, after.V) {
		t.Error("a malformed batch changed the model")
	}
}
