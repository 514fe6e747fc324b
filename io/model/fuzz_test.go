package model

import (
	"bytes"
	"io"
	"math"
	"testing"
)

type fuzzRow struct {
	key  uint64
	vals []float64
}

func decodeRows(t *testing.T, r io.Reader, spec partSpec) ([]fuzzRow, error) {
	t.Helper()
	var rows []fuzzRow
	err := decodePart(r, spec, func(key uint64, vals []float64) error {
		if spec.width > 0 && len(vals) != spec.width {
			t.Fatalf("key %d delivered with %d values, the table has %d", key, len(vals), spec.width)
		}
		rows = append(rows, fuzzRow{key, append([]float64(nil), vals...)})
		return nil
	})
	return rows, err
}

func sameRows(a, b []fuzzRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || len(a[i].vals) != len(b[i].vals) {
			return false
		}
		for j, v := range a[i].vals {
			if math.Float64bits(v) != math.Float64bits(b[i].vals[j]) {
				return false
			}
		}
	}
	return true
}

// FuzzDecodePart feeds arbitrary bytes to the part reader, as text or
// binary (told by the magic): it never panics and bounds what it
// allocates; the same bytes read in two pieces split at the midpoint give
// the same records or the same failure; and what it reads, written again
// as a binary part, reads back the same.
func FuzzDecodePart(f *testing.F) {
	f.Add([]byte("0\t0.5\n9\t-1.1\n"), uint8(1), false)
	f.Add([]byte("3\t1 2 3\n4\t1e-300 -0 5\n"), uint8(3), true)
	var b bytes.Buffer
	_ = encodeBinary(&b, &memTable{name: "x", elem: "float64", width: 2, keys: []uint64{1, 5}, vals: [][]float64{{1, 2}, {-3, 0.25}}})
	f.Add(b.Bytes(), uint8(2), true)
	f.Fuzz(func(t *testing.T, data []byte, width uint8, f64 bool) {
		elem := "float32"
		if f64 {
			elem = "float64"
		}
		spec := partSpec{uri: "p", size: int64(len(data)), width: int(width % 5), elem: elem}
		rows, err := decodeRows(t, bytes.NewReader(data), spec)
		mid := len(data) / 2
		rows2, err2 := decodeRows(t, io.MultiReader(bytes.NewReader(data[:mid]), bytes.NewReader(data[mid:])), spec)
		if (err == nil) != (err2 == nil) || !sameRows(rows, rows2) {
			t.Fatalf("read whole: %d records, %v; in two pieces: %d records, %v", len(rows), err, len(rows2), err2)
		}
		if err != nil || len(rows) == 0 {
			return
		}
		w := len(rows[0].vals)
		m := &memTable{name: "x", elem: elem, width: w}
		for _, r := range rows {
			if len(r.vals) != w {
				return // a text part without a known width may vary
			}
			if allZero(r.vals) {
				continue // left out when written
			}
			m.keys = append(m.keys, r.key)
			m.vals = append(m.vals, r.vals)
		}
		var out bytes.Buffer
		if err := encodeBinary(&out, m); err != nil {
			t.Fatal(err)
		}
		again, err := decodeRows(t, bytes.NewReader(out.Bytes()), partSpec{uri: "again", size: int64(out.Len()), width: w, elem: elem, format: FormatBinary})
		if err != nil {
			t.Fatalf("reading the records written again: %v", err)
		}
		var want []fuzzRow
		for i, k := range m.keys {
			want = append(want, fuzzRow{k, m.vals[i]})
		}
		if f64 || !sameRowsAs32(again, want) {
			if !sameRows(again, want) {
				t.Fatalf("records written again read back differently")
			}
		}
	})
}

// sameRowsAs32 compares rows after rounding b's values to float32, as a
// float32 binary part stores them.
func sameRowsAs32(a, b []fuzzRow) bool {
	c := make([]fuzzRow, len(b))
	for i, r := range b {
		c[i] = fuzzRow{r.key, make([]float64, len(r.vals))}
		for j, v := range r.vals {
			c[i].vals[j] = float64(float32(v))
		}
	}
	return sameRows(a, c)
}
