package partition_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/spindle-ps/spindle/psnode/partition"
)

func BenchmarkSplit(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 1_000_000
	keys := sortedKeys(rng, n, 0)
	for _, kind := range []string{partition.KindRange, partition.KindHash, partition.KindConsistent} {
		for _, parts := range []int{2, 16} {
			b.Run(fmt.Sprintf("kind=%s/keys=%d/parts=%d", kind, n, parts), func(b *testing.B) {
				p, err := partition.New(kind, parts, 0)
				if err != nil {
					b.Fatal(err)
				}
				segs, err := p.Split(keys, nil) // warm the reused output
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(8 * len(keys)))
				b.ReportAllocs()
				for b.Loop() {
					if segs, err = p.Split(keys, segs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(keys))*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
			})
		}
	}
}
