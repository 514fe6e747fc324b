package ckpt

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-ps/spindle/io/dfs"
)

// BenchmarkServerFile writes and reads a server file of float32 values,
// dim 4 and state width 2 (a small embedding with Adam's two moments),
// on the local file system. MB/s counts file bytes. op=read reads the file
// into memory (files up to 64 MiB); op=read-2pass forces the streaming
// verify-then-decode passes that larger files take. op=write includes the
// SHA-256, the fsync of Close and the rename.
func BenchmarkServerFile(b *testing.B) {
	const dim, sw = 4, 2
	for _, keys := range []int{1_000_000} {
		rng := rand.New(rand.NewPCG(1, 2))
		ks := make([]uint64, keys)
		vals := make([]float32, keys*dim)
		state := make([]float32, keys*dim*sw)
		for i := range ks {
			ks[i] = rng.Uint64()
		}
		for i := range vals {
			vals[i] = rng.Float32()
		}
		for i := range state {
			state[i] = rng.Float32()
		}
		records := func(yield func(uint64, []float32, []float32) bool) {
			for i, k := range ks {
				if !yield(k, vals[i*dim:(i+1)*dim], state[i*dim*sw:(i+1)*dim*sw]) {
					return
				}
			}
		}
		h := Header{Dim: dim, StateWidth: sw, Records: int64(keys)}
		dir := b.TempDir()
		name := filepath.Join(dir, "server-0")
		fe, err := WriteServerFile(b.Context(), dfs.Local{}, name, h, records)
		if err != nil {
			b.Fatal(err)
		}

		b.Run(fmt.Sprintf("op=write/keys=%d", keys), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(fe.Bytes)
			for b.Loop() {
				if _, err := WriteServerFile(b.Context(), dfs.Local{}, name, h, records); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fe.Bytes)/float64(keys), "B/key")
		})
		for _, m := range []struct {
			op       string
			memLimit int64
		}{{"read", memReadLimit}, {"read-2pass", 0}} {
			b.Run(fmt.Sprintf("op=%s/keys=%d", m.op, keys), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(fe.Bytes)
				var sum float32
				for b.Loop() {
					n := 0
					if _, err := readServerFile(b.Context(), dfs.Local{}, name, func(_ uint64, v, s []float32) error {
						sum += v[0] + s[0]
						n++
						return nil
					}, m.memLimit); err != nil {
						b.Fatal(err)
					}
					if n != keys {
						b.Fatalf("read %d records, want %d", n, keys)
					}
				}
				b.ReportMetric(float64(fe.Bytes)/float64(keys), "B/key")
			})
		}
		os.Remove(name)
	}
}
