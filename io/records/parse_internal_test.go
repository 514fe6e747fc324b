package records

import (
	"bytes"
	"strconv"
	"testing"
)

// FuzzScanFeature: where the one-pass reading of a feature token accepts
// it, the general one reads the same index, value and end.
func FuzzScanFeature(f *testing.F) {
	for _, s := range []string{"3:0.5", "17:1 2:2", "18446744073709551615:1", "9999999999999999999:1", "12:", ":1", "1a:2", "5:1:2", "7"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		i := skipSpace(line, 0)
		if i == len(line) {
			return
		}
		key, val, end, ok := scanFeature(line, i)
		if !ok {
			return
		}
		k2, v2, e2, err := readFeature(line, i)
		if err != nil || k2 != key || !bytes.Equal(v2, val) || e2 != end {
			t.Fatalf("%q: one pass read %d, %q, end %d; the general reading %d, %q, end %d, %v", line, key, val, end, k2, v2, e2, err)
		}
	})
}

// TestParseValueDigit: a one-digit value reads as strconv reads it, and
// any other one-byte value is still refused.
func TestParseValueDigit(t *testing.T) {
	for c := 0; c < 256; c++ {
		got, err := parseValue([]byte{byte(c)})
		want, werr := strconv.ParseFloat(string([]byte{byte(c)}), 32)
		if (err == nil) != (werr == nil) || (err == nil && got != float32(want)) {
			t.Errorf("%q: %v, %v; strconv: %v, %v", byte(c), got, err, want, werr)
		}
	}
}
