package records

import (
	"math"
	"strconv"
	"testing"
)

// TestFastFloat32: the fast path gives strconv's float32, bit for bit,
// and leaves other forms to it.
func TestFastFloat32(t *testing.T) {
	for _, s := range []string{"0", "1", "-1", "+1", "0.5", "-0", "-0.0", ".5", "1.", "3.14159", "0.1234567",
		"16777216", "0.0000000001", "123.456", "9999999", "1677.7216", "0.3333333"} {
		assertFastFloat(t, s, true)
	}
	for _, s := range []string{"", "-", ".", "+.", "1e5", "16777217", "0.00000000001", "1.0.0", "inf", "nan", "0x10", "1_0", " 1", "1 ", "--1",
		"0.50000000000"} {
		assertFastFloat(t, s, false)
	}
}

func assertFastFloat(t *testing.T, s string, fast bool) {
	t.Helper()
	v, ok := fastFloat32([]byte(s))
	if ok != fast {
		t.Errorf("%q: fast path %v, want %v", s, ok, fast)
	}
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(s, 32)
	if err != nil || math.Float32bits(v) != math.Float32bits(float32(f)) {
		t.Errorf("%q: fast path %v (%#x), strconv %v (%#x, %v)", s, v, math.Float32bits(v), float32(f), math.Float32bits(float32(f)), err)
	}
}

// FuzzFastFloat32: whatever the fast path accepts, strconv reads the same
// float32, bit for bit.
func FuzzFastFloat32(f *testing.F) {
	for _, s := range []string{"0.5", "-1", "123.456", "16777216", "1e5", ".5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := fastFloat32([]byte(s))
		if !ok {
			return
		}
		g, err := strconv.ParseFloat(s, 32)
		if err != nil || math.Float32bits(v) != math.Float32bits(float32(g)) {
			t.Fatalf("%q: fast path %v (%#x), strconv %v (%v)", s, v, math.Float32bits(v), float32(g), err)
		}
	})
}
