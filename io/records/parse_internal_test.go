package records

import (
	"bytes"
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
