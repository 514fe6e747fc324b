package store_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/psnode/store"
)

func TestUpdaterSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		u     store.Updater[float64]
		w0    float64
		grads []float64
		wantW []float64   // weight after each step
		wantS [][]float64 // state after each step (nil: not checked)
	}{
		{
			name: "sum", u: store.Sum[float64]{}, w0: 1,
			grads: []float64{0.5, -2},
			wantW: []float64{1.5, -0.5},
		},
		{
			// w = 1 - 0.1*(0.5 + 0.5*1) = 0.9
			// w = 0.9 - 0.1*(-1 + 0.5*0.9) = 0.955
			name: "sgd", u: store.SGD[float64]{LR: 0.1, L2: 0.5}, w0: 1,
			grads: []float64{0.5, -1},
			wantW: []float64{0.9, 0.955},
		},
		{
			// h = 4, w = 1 - 0.1*2/2 = 0.9
			// h = 5, w = 0.9 + 0.1/sqrt(5) = 0.94472135955
			name: "adagrad", u: store.AdaGrad[float64]{LR: 0.1, Eps: 1e-10}, w0: 1,
			grads: []float64{2, -1},
			wantW: []float64{0.900000000005, 0.9447213595529959},
			wantS: [][]float64{{4}, {5}},
		},
		{
			// g' = 2 + 0.5*1 = 2.5, h = 6.25, w = 1 - 0.1*2.5/2.5 = 0.9
			// g' = -1 + 0.5*0.9 = -0.55, h = 6.5525, w = 0.9 + 0.055/sqrt(6.5525)
			name: "adagrad/l2", u: store.AdaGrad[float64]{LR: 0.1, Eps: 1e-10, L2: 0.5}, w0: 1,
			grads: []float64{2, -1},
			wantW: []float64{0.900000000004, 0.9214861782705981},
			wantS: [][]float64{{6.25}, {6.5525}},
		},
		{
			// Alpha 1, Beta 1, L1 0.5, L2 1; state (z, n) starts at 0, so w = 0.
			// g = 1:  sigma = 1, z = 1, n = 1, w = -(1-0.5)/((1+1)/1+1) = -1/6
			// g = -2: sigma = sqrt(5)-1, z = 1-2+(sqrt(5)-1)/6 = -0.79398867,
			//         n = 5, w = -(z+0.5)/(1+sqrt(5)+1) = 0.06940131
			// g = 3:  sigma = sqrt(14)-sqrt(5), z = z+3-sigma*0.06940131
			//         = 2.10152145, n = 14, w = -(z-0.5)/(2+sqrt(14)) = -0.27893017
			name: "ftrl", u: store.FTRL[float64]{Alpha: 1, Beta: 1, L1: 0.5, L2: 1}, w0: 0,
			grads: []float64{1, -2, 3},
			wantW: []float64{-1.0 / 6, 0.06940131083312301, -0.27893016652166525},
			wantS: [][]float64{{1, 1}, {-0.7939886704167016, 5}, {2.1015214510032045, 14}},
		},
		{
			// Alpha 1, Beta 1, L1 10, L2 0: |z| stays below L1, w stays exactly 0.
			// g = 3: z = 3, n = 9; g = 4: z = 7, n = 25; g = 4: sigma = (sqrt(41)-5),
			// z = 11 > L1, n = 41, w = -(11-10)/(1+sqrt(41)) = -0.13505
			name: "ftrl/sparse", u: store.FTRL[float64]{Alpha: 1, Beta: 1, L1: 10}, w0: 0,
			grads: []float64{3, 4, 4},
			wantW: []float64{0, 0, -1 / (1 + math.Sqrt(41))},
			wantS: [][]float64{{3, 9}, {7, 25}, {11, 41}},
		},
		{
			// t = 1: m = 0.05, v = 0.00025, m^ = 0.5, v^ = 0.25,
			//        w = 1 - 0.1*0.5/(0.5+1e-8) = 0.900000002
			// t = 2: m = 0.045-0.1 = -0.055, v = 0.00024975+0.001 = 0.00124975,
			//        m^ = -0.055/0.19, v^ = 0.00124975/0.001999,
			//        w = 0.900000002 + 0.1*0.28947368/0.79068803 = 0.93661035
			name: "adam", u: store.Adam[float64]{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, w0: 1,
			grads: []float64{0.5, -1},
			wantW: []float64{0.9000000019999999, 0.9366103542405653},
			wantS: [][]float64{{0.05, 0.00025, 1}, {-0.055, 0.00124975, 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Three coordinates with the same history: each must use its
			// own interleaved state and give the single-coordinate result.
			const n = 3
			sw := tt.u.StateWidth()
			w := []float64{tt.w0, tt.w0, tt.w0}
			s := make([]float64, n*sw)
			for step, g := range tt.grads {
				tt.u.Apply(w, s, []float64{g, g, g})
				for i := range n {
					if !near(w[i], tt.wantW[step], 1e-12) {
						t.Fatalf("step %d: w[%d] = %.17g, want %.17g", step, i, w[i], tt.wantW[step])
					}
					if tt.wantS == nil {
						continue
					}
					for j, want := range tt.wantS[step] {
						if got := s[i*sw+j]; !near(got, want, 1e-12) {
							t.Fatalf("step %d: state[%d][%d] = %.17g, want %.17g", step, i, j, got, want)
						}
					}
				}
			}
		})
	}
}

// near reports whether got is within tol of want, relative to max(1, |want|).
func near(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

func TestFTRLSparsity(t *testing.T) {
	t.Parallel()
	u := store.FTRL[float32]{Alpha: 0.1, Beta: 1, L1: 1000, L2: 1}
	const n = 64
	w := make([]float32, n)
	s := make([]float32, 2*n)
	g := make([]float32, n)
	for step := range 100 {
		for i := range g {
			g[i] = float32((i*7+step*3)%11) - 5 // bounded gradients in [-5, 5]
		}
		u.Apply(w, s, g)
	}
	for i, wi := range w {
		if wi != 0 {
			t.Fatalf("w[%d] = %g, want exactly 0 under a large L1", i, wi)
		}
		if z := s[2*i]; math.Abs(float64(z)) > 1000 {
			t.Fatalf("z[%d] = %g exceeds L1 but w is 0", i, z)
		}
	}
	// Lowering L1 below |z| makes the weights nonzero.
	nonzero := 0
	u.L1 = 0
	u.Apply(w, s, make([]float32, n))
	for _, wi := range w {
		if wi != 0 {
			nonzero++
		}
	}
	if nonzero == 0 {
		t.Fatal("all weights still 0 with L1 = 0")
	}
}

// TestUpdaterFloat32 checks that float32 tables follow the float64 results.
func TestUpdaterFloat32(t *testing.T) {
	t.Parallel()
	for _, name := range store.UpdaterNames() {
		t.Run("updater="+name, func(t *testing.T) {
			t.Parallel()
			u64, err := store.NewUpdater[float64](name, nil)
			if err != nil {
				t.Fatal(err)
			}
			u32, err := store.NewUpdater[float32](name, nil)
			if err != nil {
				t.Fatal(err)
			}
			w64, s64 := []float64{0.5}, make([]float64, u64.StateWidth())
			w32, s32 := []float32{0.5}, make([]float32, u32.StateWidth())
			for step := range 50 {
				g := math.Sin(float64(step)) * 2
				u64.Apply(w64, s64, []float64{g})
				u32.Apply(w32, s32, []float32{float32(g)})
			}
			if !near(float64(w32[0]), w64[0], 1e-5) {
				t.Fatalf("float32 w = %g, float64 w = %g", w32[0], w64[0])
			}
		})
	}
}

func TestApplyDoesNotAllocate(t *testing.T) {
	for _, name := range store.UpdaterNames() {
		u, err := store.NewUpdater[float32](name, nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 100
		w, s, g := make([]float32, n), make([]float32, n*u.StateWidth()), make([]float32, n)
		for i := range g {
			g[i] = 0.1
		}
		if allocs := testing.AllocsPerRun(10, func() { u.Apply(w, s, g) }); allocs != 0 {
			t.Errorf("%s Apply: %v allocs, want 0", name, allocs)
		}
	}
}

func TestNewUpdater(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		updater string
		params  map[string]float64
		want    store.Updater[float64]
		wantErr error
	}{
		{name: "sum", updater: "sum", want: store.Sum[float64]{}},
		{name: "sgd/defaults", updater: "sgd", want: store.DefaultSGD[float64]()},
		{name: "sgd/params", updater: "sgd", params: map[string]float64{"lr": 0.5, "l2": 0.1},
			want: store.SGD[float64]{LR: 0.5, L2: 0.1}},
		{name: "adagrad", updater: "adagrad", params: map[string]float64{"eps": 1e-6},
			want: store.AdaGrad[float64]{LR: 0.01, Eps: 1e-6}},
		{name: "ftrl", updater: "ftrl", params: map[string]float64{"alpha": 0.05, "l1": 0},
			want: store.FTRL[float64]{Alpha: 0.05, Beta: 1, L1: 0, L2: 1}},
		{name: "adam", updater: "adam", params: map[string]float64{"beta1": 0},
			want: store.Adam[float64]{LR: 0.001, Beta1: 0, Beta2: 0.999, Eps: 1e-8}},
		{name: "unknown updater", updater: "rmsprop", wantErr: store.ErrUnknownUpdater},
		{name: "unknown param", updater: "sgd", params: map[string]float64{"momentum": 0.9}, wantErr: store.ErrUnknownParam},
		{name: "sum takes no params", updater: "sum", params: map[string]float64{"lr": 1}, wantErr: store.ErrUnknownParam},
		{name: "negative lr", updater: "sgd", params: map[string]float64{"lr": -1}, wantErr: store.ErrInvalidConfig},
		{name: "zero lr", updater: "adagrad", params: map[string]float64{"lr": 0}, wantErr: store.ErrInvalidConfig},
		{name: "NaN l2", updater: "sgd", params: map[string]float64{"l2": math.NaN()}, wantErr: store.ErrInvalidConfig},
		{name: "infinite alpha", updater: "ftrl", params: map[string]float64{"alpha": math.Inf(1)}, wantErr: store.ErrInvalidConfig},
		{name: "zero beta", updater: "ftrl", params: map[string]float64{"beta": 0}, wantErr: store.ErrInvalidConfig},
		{name: "negative l1", updater: "ftrl", params: map[string]float64{"l1": -0.1}, wantErr: store.ErrInvalidConfig},
		{name: "beta1=1", updater: "adam", params: map[string]float64{"beta1": 1}, wantErr: store.ErrInvalidConfig},
		{name: "beta2>1", updater: "adam", params: map[string]float64{"beta2": 1.5}, wantErr: store.ErrInvalidConfig},
		{name: "zero eps", updater: "adam", params: map[string]float64{"eps": 0}, wantErr: store.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, err := store.NewUpdater[float64](tt.updater, tt.params)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("NewUpdater(%q, %v) error = %v, want %v", tt.updater, tt.params, err, tt.wantErr)
				}
				if u != nil {
					t.Fatalf("NewUpdater returned %v with an error", u)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewUpdater(%q, %v): %v", tt.updater, tt.params, err)
			}
			if u != tt.want {
				t.Fatalf("NewUpdater(%q, %v) = %#v, want %#v", tt.updater, tt.params, u, tt.want)
			}
			if u.Name() != tt.updater {
				t.Fatalf("Name() = %q, want %q", u.Name(), tt.updater)
			}
		})
	}
}

func TestNewUpdaterErrorNamesProblem(t *testing.T) {
	t.Parallel()
	_, err := store.NewUpdater[float32]("sgd", map[string]float64{"lr": 1, "momentum": 1, "decay": 2})
	for _, want := range []string{`"momentum"`, `"decay"`, "known: l2, lr"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v does not mention %s", err, want)
		}
	}
	_, err = store.NewUpdater[float32]("rmsprop", nil)
	if err == nil || !strings.Contains(err.Error(), `"rmsprop"`) {
		t.Fatalf("error %v does not name the updater", err)
	}
}

func TestValidateDefaults(t *testing.T) {
	t.Parallel()
	for name, err := range map[string]error{
		"sgd":     store.DefaultSGD[float32]().Validate(),
		"adagrad": store.DefaultAdaGrad[float32]().Validate(),
		"ftrl":    store.DefaultFTRL[float32]().Validate(),
		"adam":    store.DefaultAdam[float32]().Validate(),
		"sum":     store.Sum[float32]{}.Validate(),
	} {
		if err != nil {
			t.Errorf("%s defaults invalid: %v", name, err)
		}
	}
}

func TestCheckApply(t *testing.T) {
	t.Parallel()
	u := store.DefaultFTRL[float32]()
	tests := []struct {
		name    string
		w, s, g int
		wantErr bool
	}{
		{name: "ok", w: 3, s: 6, g: 3},
		{name: "ok/extra state", w: 3, s: 8, g: 3},
		{name: "empty", w: 0, s: 0, g: 0},
		{name: "short gradient", w: 3, s: 6, g: 2, wantErr: true},
		{name: "long gradient", w: 3, s: 6, g: 4, wantErr: true},
		{name: "short state", w: 3, s: 5, g: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := store.CheckApply[float32](u, make([]float32, tt.w), make([]float32, tt.s), make([]float32, tt.g))
			if tt.wantErr != errors.Is(err, store.ErrLength) || tt.wantErr != (err != nil) {
				t.Fatalf("CheckApply = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
