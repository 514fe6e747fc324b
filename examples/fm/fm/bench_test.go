package fm

import (
	"fmt"
	"testing"

	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/examples/lr/lr"
)

// BenchmarkGradient measures one mini-batch gradient of the generated
// data (about 24 features per example) for several embedding sizes.
func BenchmarkGradient(b *testing.B) {
	cfg := gen.Default()
	cfg.Rows = 100
	batch, err := gen.Examples(cfg)
	if err != nil {
		b.Fatal(err)
	}
	keys, err := lr.BatchKeys(batch, nil)
	if err != nil {
		b.Fatal(err)
	}
	nnz := 0
	for _, ex := range batch {
		nnz += len(ex.Keys)
	}
	for _, dim := range []int{4, 8, 32} {
		b.Run(fmt.Sprintf("batch=%d/dim=%d", len(batch), dim), func(b *testing.B) {
			c := Config{Dim: dim, Bias: true, InitScale: DefaultInitScale}
			w, gw := make([]float32, len(keys)), make([]float32, len(keys))
			v, gv := make([]float32, (len(keys)-1)*dim), make([]float32, (len(keys)-1)*dim)
			for i, k := range FeatureKeys(keys) {
				Init(k, v[i*dim:(i+1)*dim], c.InitScale)
			}
			b.ReportAllocs()
			b.SetBytes(int64(nnz * (1 + dim) * 4))
			for b.Loop() {
				if _, err := c.Gradient(batch, keys, w, v, gw, gv); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nnz), "ns/nonzero")
		})
	}
}
