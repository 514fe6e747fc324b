package lr_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/psnode/store"
)

func newLocal(t *testing.T, name string, params map[string]float64) *lr.Local {
	t.Helper()
	u, err := store.NewUpdater[float32](name, params)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lr.NewLocal(u)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLocalOneStep checks one step on a two-example batch against values
// computed by hand, then the loss of a second step, which shows the
// trainer pulls the weights the first step pushed.
//
// Batch: (y=1, x1=1, x3=2) and (y=0, x3=1). All weights start at 0, so
// both margins are 0, p = 1/2, and the summed gradients are
//
//	key 0: (1/2-1) + (1/2-0)     =  0
//	key 1: (1/2-1)·1             = -1/2
//	key 3: (1/2-1)·2 + (1/2-0)·1 = -1/2
//
// with loss 2·ln 2.
func TestLocalOneStep(t *testing.T) {
	t.Parallel()
	batch := []lr.Example{ex(1, []uint64{1, 3}, 1, 2), ex(0, []uint64{3}, 1)}
	tests := []struct {
		name   string
		upd    string
		params map[string]float64
		// Weights of keys 0, 1 and 3 after the step.
		want []float32
	}{
		// w = -g.
		{name: "sgd", upd: "sgd", params: map[string]float64{"lr": 1}, want: []float32{0, 0.5, 0.5}},
		// FTRL from n = z = 0 with g = -1/2: n = 1/4,
		// sigma = (sqrt(1/4) - 0)/alpha = 5, z = g - sigma·0 = -1/2,
		// w = -(z + l1)/((beta + sqrt(n))/alpha + l2)
		//   = -(-0.5 + 0.1)/((1 + 0.5)/0.1 + 1) = 0.4/16 = 0.025.
		// Key 0 has g = 0: z stays 0, w = 0.
		{
			name: "ftrl", upd: "ftrl",
			params: map[string]float64{"alpha": 0.1, "beta": 1, "l1": 0.1, "l2": 1},
			want:   []float32{0, 0.025, 0.025},
		},
		// With l1 1 > |z| the weights stay exactly 0.
		{name: "ftrl l1", upd: "ftrl", params: map[string]float64{"l1": 1}, want: []float32{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLocal(t, tt.upd, tt.params)
			loss, err := l.Step(batch)
			if err != nil {
				t.Fatal(err)
			}
			if want := 2 * math.Ln2; math.Abs(loss-want) > 1e-12 {
				t.Errorf("first loss = %v, want %v", loss, want)
			}
			m := l.Model()
			if !slices.Equal(m.Keys, []uint64{0, 1, 3}) {
				t.Fatalf("model keys = %v, want [0 1 3]", m.Keys)
			}
			for i, w := range m.W {
				if math.Abs(float64(w-tt.want[i])) > 1e-7 {
					t.Errorf("w[key %d] = %v, want %v", m.Keys[i], w, tt.want[i])
				}
			}
			if l.Len() != 3 {
				t.Errorf("Len = %d, want 3", l.Len())
			}
			w0, w1, w3 := float64(tt.want[0]), float64(tt.want[1]), float64(tt.want[2])
			z1, z2 := w0+w1+2*w3, w0+w3
			want := math.Log1p(math.Exp(-z1)) + math.Log1p(math.Exp(z2))
			loss, err = l.Step(batch)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(loss-want) > 1e-6 {
				t.Errorf("second loss = %v, want %v", loss, want)
			}
		})
	}
}

// separable returns examples over features 1..8 whose label is 1 exactly
// when feature 1 or feature 2 is present.
func separable() []lr.Example {
	var out []lr.Example
	for mask := 1; mask < 1<<8; mask++ {
		var keys []uint64
		for b := range 8 {
			if mask&(1<<b) != 0 {
				keys = append(keys, uint64(b+1))
			}
		}
		var y float32
		if mask&3 != 0 {
			y = 1
		}
		out = append(out, ex(y, keys))
	}
	return out
}

func TestLocalLossDecreases(t *testing.T) {
	t.Parallel()
	data := separable()
	for _, name := range []string{"ftrl", "adagrad", "sgd", "adam"} {
		t.Run("updater="+name, func(t *testing.T) {
			t.Parallel()
			var params map[string]float64
			switch name {
			case "ftrl":
				params = lr.DefaultFTRLParams()
				params["l1"] = 0.1
			case "adagrad":
				params = map[string]float64{"lr": 0.5}
			case "sgd":
				params = map[string]float64{"lr": 0.05}
			case "adam":
				params = map[string]float64{"lr": 0.05}
			}
			l := newLocal(t, name, params)
			var losses []float64
			for range 30 {
				loss, err := l.Epoch(data, 16)
				if err != nil {
					t.Fatal(err)
				}
				losses = append(losses, loss/float64(len(data)))
			}
			first, last := losses[0], losses[len(losses)-1]
			if !(last < first/4) {
				t.Errorf("mean loss went from %.4f to %.4f, want a fall by 4x", first, last)
			}
			for i := 5; i < len(losses); i += 5 {
				if losses[i] > losses[i-5] {
					t.Errorf("mean loss rose from %.4f (epoch %d) to %.4f (epoch %d)", losses[i-5], i-5, losses[i], i)
				}
			}
			auc, _, err := l.Model().Evaluate(data)
			if err != nil {
				t.Fatal(err)
			}
			if auc != 1 {
				t.Errorf("training AUC = %v, want 1 on separable data", auc)
			}
		})
	}
}

func TestLocalErrors(t *testing.T) {
	t.Parallel()
	if _, err := lr.NewLocal(nil); err == nil {
		t.Error("NewLocal(nil): no error")
	}
	l := newLocal(t, "ftrl", nil)
	if _, err := l.Step([]lr.Example{ex(1, []uint64{1}), ex(1, []uint64{0})}); !errors.Is(err, lr.ErrExample) {
		t.Errorf("Step with feature id 0: error %v, want ErrExample", err)
	}
	if _, err := l.Epoch([]lr.Example{ex(1, []uint64{1}), ex(3, []uint64{2})}, 1); !errors.Is(err, lr.ErrExample) {
		t.Errorf("Epoch with label 3: error %v, want ErrExample", err)
	}
	if _, err := l.Epoch(nil, 0); err == nil {
		t.Error("Epoch with batch size 0: no error")
	}
	// The first Epoch applied its first batch only.
	if got := l.Model().Keys; !slices.Equal(got, []uint64{0, 1}) {
		t.Errorf("model keys after failed steps = %v, want [0 1]", got)
	}
	if loss, err := l.Step(nil); loss != 0 || err != nil {
		t.Errorf("Step(nil) = %v, %v, want 0, nil", loss, err)
	}
}

func ExampleAUC() {
	scores := []float64{0.1, 0.4, 0.35, 0.8}
	labels := []float32{0, 0, 1, 1}
	auc, err := lr.AUC(scores, labels)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(auc)
	// Output: 0.75
}

func ExampleLocal() {
	upd, err := store.NewUpdater[float32]("ftrl", lr.DefaultFTRLParams())
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := lr.NewLocal(upd)
	if err != nil {
		fmt.Println(err)
		return
	}
	batch := []lr.Example{
		{Label: 1, Keys: []uint64{1, 7}, Vals: []float32{1, 1}},
		{Label: 0, Keys: []uint64{2, 7}, Vals: []float32{1, 1}},
	}
	loss, err := l.Step(batch)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("loss %.4f, %d keys\n", loss, l.Len())
	// Output: loss 1.3863, 4 keys
}
