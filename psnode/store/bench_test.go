package store_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/store"
)

// benchKeys returns n random keys from a seeded generator and the same keys
// in another random order, for lookups.
func benchKeys(n int) (keys, shuffled []uint64) {
	rng := rand.New(rand.NewPCG(2024, 1))
	keys = make([]uint64, n)
	for i := range keys {
		keys[i] = rng.Uint64()
	}
	shuffled = append([]uint64(nil), keys...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	return keys, shuffled
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkTable inserts random keys into an empty table (growing it as it
// goes) and looks every key up again in another order. It reports the
// memory per parameter (MemoryBytes/Len for the table, the heap growth for
// the Go map baseline, and the heap growth for both), inserts/s and
// lookups/s. Each op builds a whole table: run with -benchtime=1x.
func BenchmarkTable(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		const dim = 1
		keys, shuffled := benchKeys(n)
		b.Run(fmt.Sprintf("keys=%d/dim=%d/impl=table", n, dim), func(b *testing.B) {
			b.ReportAllocs()
			var inserts, lookups time.Duration
			var bytesPerParam, heapPerParam float64
			for b.Loop() {
				before := heapAlloc()
				start := time.Now()
				tab, err := store.NewTable[float32](dim, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				for i, k := range keys {
					slot, _ := tab.Insert(k)
					tab.Vals(slot)[0] = float32(i)
				}
				inserts += time.Since(start)
				start = time.Now()
				var sum float32
				for _, k := range shuffled {
					slot, ok := tab.Lookup(k)
					if !ok {
						b.Fatalf("key %d missing", k)
					}
					sum += tab.Vals(slot)[0]
				}
				lookups += time.Since(start)
				bytesPerParam = float64(tab.MemoryBytes()) / float64(tab.Len())
				heapPerParam = float64(heapAlloc()-before) / float64(tab.Len())
				runtime.KeepAlive(tab)
				_ = sum
			}
			b.ReportMetric(bytesPerParam, "bytes/param")
			b.ReportMetric(heapPerParam, "heap-bytes/param")
			b.ReportMetric(float64(n*b.N)/inserts.Seconds(), "inserts/s")
			b.ReportMetric(float64(n*b.N)/lookups.Seconds(), "lookups/s")
		})
		b.Run(fmt.Sprintf("keys=%d/dim=%d/impl=gomap", n, dim), func(b *testing.B) {
			b.ReportAllocs()
			var inserts, lookups time.Duration
			var heapPerParam float64
			for b.Loop() {
				before := heapAlloc()
				start := time.Now()
				m := make(map[uint64]float32)
				for i, k := range keys {
					m[k] = float32(i)
				}
				inserts += time.Since(start)
				start = time.Now()
				var sum float32
				for _, k := range shuffled {
					v, ok := m[k]
					if !ok {
						b.Fatalf("key %d missing", k)
					}
					sum += v
				}
				lookups += time.Since(start)
				heapPerParam = float64(heapAlloc()-before) / float64(len(m))
				runtime.KeepAlive(m)
				_ = sum
			}
			b.ReportMetric(heapPerParam, "bytes/param")
			b.ReportMetric(heapPerParam, "heap-bytes/param")
			b.ReportMetric(float64(n*b.N)/inserts.Seconds(), "inserts/s")
			b.ReportMetric(float64(n*b.N)/lookups.Seconds(), "lookups/s")
		})
	}
}

func BenchmarkApply(b *testing.B) {
	const n = 1000
	for _, name := range store.UpdaterNames() {
		b.Run(fmt.Sprintf("updater=%s/n=%d", name, n), func(b *testing.B) {
			u, err := store.NewUpdater[float32](name, nil)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			w, s, g := make([]float32, n), make([]float32, n*u.StateWidth()), make([]float32, n)
			for i := range g {
				g[i] = float32(rng.NormFloat64())
			}
			b.SetBytes(int64(4 * n * (2 + u.StateWidth())))
			b.ReportAllocs()
			for b.Loop() {
				u.Apply(w, s, g)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "values/s")
		})
	}
}
