package lr_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/spindle-ps/spindle/examples/lr/gen"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/psnode/store"
)

// benchData is the default synthetic training set, generated once.
var benchData = sync.OnceValues(func() ([]lr.Example, error) {
	return gen.Examples(gen.Default())
})

func loadBenchData(b *testing.B) []lr.Example {
	b.Helper()
	data, err := benchData()
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkGradient measures Gradient on mini-batches of the default
// synthetic data set, whose keys are computed before the loop. One op is
// one batch.
func BenchmarkGradient(b *testing.B) {
	data := loadBenchData(b)
	for _, bs := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", bs), func(b *testing.B) {
			batches := make([][]lr.Example, 0, 64)
			keys := make([][]uint64, 0, 64)
			maxKeys, nnz, nkeys := 0, 0, 0
			for start := 0; start+bs <= len(data) && len(batches) < cap(batches); start += bs {
				batch := data[start : start+bs]
				k, err := lr.BatchKeys(batch, nil)
				if err != nil {
					b.Fatal(err)
				}
				batches, keys = append(batches, batch), append(keys, k)
				maxKeys = max(maxKeys, len(k))
				nkeys += len(k)
				for _, e := range batch {
					nnz += len(e.Keys)
				}
			}
			w, grad := make([]float32, maxKeys), make([]float32, maxKeys)
			for i := range w {
				w[i] = 0.01 * float32(i%7-3)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := keys[i%len(keys)]
				if _, err := lr.Gradient(batches[i%len(batches)], k, w[:len(k)], grad[:len(k)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(i*bs)/sec, "examples/s")
			b.ReportMetric(float64(nnz)/float64(len(batches)), "nnz/op")
			b.ReportMetric(float64(nkeys)/float64(len(batches)), "keys/op")
		})
	}
}

// BenchmarkBatchKeys measures the sort and deduplication of a batch's
// keys. One op is one batch.
func BenchmarkBatchKeys(b *testing.B) {
	data := loadBenchData(b)
	for _, bs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", bs), func(b *testing.B) {
			var dst []uint64
			var err error
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				start := (i * bs) % (len(data) - bs)
				if dst, err = lr.BatchKeys(data[start:start+bs], dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(i*bs)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

// BenchmarkLocal measures the whole single-process training step, the
// baseline without any network that the distributed trainer is compared
// with: BatchKeys, pull from the table, Gradient, and the updater applied
// per key. One op is the reference job of the quality test in package
// gen: a new trainer, two epochs over the default synthetic training set
// (200,000 rows, about 425,000 distinct keys), so it includes the growth
// of the table as a training job does.
func BenchmarkLocal(b *testing.B) {
	const epochs = 2
	data := loadBenchData(b)
	for _, bs := range []int{100, 1000} {
		for _, name := range []string{"ftrl", "adagrad"} {
			b.Run(fmt.Sprintf("batch=%d/updater=%s", bs, name), func(b *testing.B) {
				var params map[string]float64
				if name == "ftrl" {
					params = lr.DefaultFTRLParams()
				}
				upd, err := store.NewUpdater[float32](name, params)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var keys int
				for b.Loop() {
					l, err := lr.NewLocal(upd)
					if err != nil {
						b.Fatal(err)
					}
					for range epochs {
						if _, err := l.Epoch(data, bs); err != nil {
							b.Fatal(err)
						}
					}
					keys = l.Len()
				}
				b.ReportMetric(float64(b.N*epochs*len(data))/b.Elapsed().Seconds(), "examples/s")
				b.ReportMetric(float64(keys), "keys")
			})
		}
	}
}
