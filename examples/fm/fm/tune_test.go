package fm

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/psnode/store"
)

func TestTune(t *testing.T) {
	spec := os.Getenv("FMTUNE")
	if spec == "" {
		t.Skip()
	}
	cfg := gen.Default()
	train, _ := gen.Examples(cfg)
	test, _ := gen.Examples(cfg.TestSet(20000))
	epochs := 2
	batch, _ := strconv.Atoi(os.Getenv("FMBATCH"))
	{
		l, _ := lr.NewLocal(must(store.NewUpdater[float32]("ftrl", lr.DefaultFTRLParams())))
		for e := 0; e < epochs; e++ {
			l.Epoch(train, batch)
			auc, ll, _ := l.Model().Evaluate(test)
			t.Logf("lr epoch %d auc %.5f ll %.5f", e, auc, ll)
		}
	}
	for _, s := range strings.Split(spec, ";") {
		p := map[string]float64{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			p[k] = f
		}
		c := DefaultConfig()
		if p["dim"] > 0 {
			c.Dim = int(p["dim"])
		}
		if p["scale"] > 0 {
			c.InitScale = p["scale"]
		}
		wp := lr.DefaultFTRLParams()
		for _, k := range []string{"alpha", "beta", "l1", "l2"} {
			if v, ok := p["w"+k]; ok {
				wp[k] = v
			}
		}
		vp := map[string]float64{"lr": p["vlr"], "l2": p["vl2"]}
		l, err := NewLocal(c, must(store.NewUpdater[float32]("ftrl", wp)), must(store.NewUpdater[float32]("adagrad", vp)))
		if err != nil {
			t.Fatal(err)
		}
		for e := 0; e < epochs; e++ {
			l.Epoch(train, batch)
			m := l.Model()
			auc, ll, _ := m.Evaluate(test)
			var mx float32
			for _, x := range m.V {
				mx = max(mx, x, -x)
			}
			t.Logf("fm %s epoch %d auc %.5f ll %.5f max|v| %.4f", s, e, auc, ll, mx)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
