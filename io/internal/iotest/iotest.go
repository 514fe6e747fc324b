// Package iotest generates libsvm data with known contents for the io
// packages' tests, and digests parsed records so that tests can check
// that every record was read exactly once.
package iotest

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/spindle-ps/spindle/io/records"
)

// GenLibSVM returns n libsvm records (and some blank lines) written in
// the variety real files have: labels 0/1/-1/+1, features out of order,
// indexes up to 2^64-1, "\n" and "\r\n" endings, tabs and repeated
// spaces, lines without features, no newline at the end. It also returns
// the records as they should parse. The output depends only on seed.
func GenLibSVM(seed uint64, n int) ([]byte, []records.Example) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b bytes.Buffer
	exs := make([]records.Example, 0, n)
	for i := range n {
		if rng.IntN(20) == 0 {
			b.WriteString("\n") // a blank line
		}
		var ex records.Example
		switch rng.IntN(4) {
		case 0:
			b.WriteString("0")
		case 1:
			b.WriteString("1")
			ex.Label = 1
		case 2:
			b.WriteString("-1")
		default:
			b.WriteString("+1")
			ex.Label = 1
		}
		nf := rng.IntN(12)
		seen := map[uint64]bool{}
		for range nf {
			var k uint64
			switch rng.IntN(10) {
			case 0:
				k = math.MaxUint64 - uint64(rng.IntN(3))
			default:
				k = uint64(rng.IntN(100000))
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			v := float32(rng.NormFloat64() * 10)
			ex.Keys = append(ex.Keys, k)
			ex.Vals = append(ex.Vals, v)
			if rng.IntN(8) == 0 {
				b.WriteString("\t")
			} else {
				b.WriteString(" ")
			}
			b.WriteString(strconv.FormatUint(k, 10))
			b.WriteByte(':')
			b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		sortPairs(ex.Keys, ex.Vals)
		exs = append(exs, ex)
		if rng.IntN(10) == 0 {
			b.WriteString("  ")
		}
		if i == n-1 && rng.IntN(2) == 0 {
			break // no newline at the end of the file
		}
		if rng.IntN(6) == 0 {
			b.WriteString("\r\n")
		} else {
			b.WriteString("\n")
		}
	}
	return b.Bytes(), exs
}

func sortPairs(keys []uint64, vals []float32) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
			vals[j], vals[j-1] = vals[j-1], vals[j]
		}
	}
}

// Digest summarises a multiset of records: equal digests mean (with
// overwhelming probability) the same records the same number of times.
type Digest struct {
	N   int
	Sum uint64
	Xor uint64
}

// Add adds one record.
func (d *Digest) Add(ex *records.Example) {
	h := fnv.New64a()
	var buf [8]byte
	binary.LittleEndian.PutUint32(buf[:4], math.Float32bits(ex.Label))
	h.Write(buf[:4])
	for i, k := range ex.Keys {
		binary.LittleEndian.PutUint64(buf[:], k)
		h.Write(buf[:])
		binary.LittleEndian.PutUint32(buf[:4], math.Float32bits(ex.Vals[i]))
		h.Write(buf[:4])
	}
	s := h.Sum64()
	d.N++
	d.Sum += s
	d.Xor ^= s * 0x9e3779b97f4a7c15
}

// DigestOf digests records.
func DigestOf(exs []records.Example) Digest {
	var d Digest
	for i := range exs {
		d.Add(&exs[i])
	}
	return d
}
