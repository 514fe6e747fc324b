package creds

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"testing"
)

// javaWriteVLong follows WritableUtils.writeVLong statement by statement, as
// an independent check of AppendVLong.
func javaWriteVLong(i int64) []byte {
	var out []byte
	if i >= -112 && i <= 127 {
		return append(out, byte(i))
	}
	length := -112
	if i < 0 {
		i ^= -1
		length = -120
	}
	tmp := i
	for tmp != 0 {
		tmp >>= 8
		length--
	}
	out = append(out, byte(length))
	if length < -120 {
		length = -(length + 120)
	} else {
		length = -(length + 112)
	}
	for idx := length; idx != 0; idx-- {
		shiftbits := uint((idx - 1) * 8)
		mask := int64(0xFF) << shiftbits
		out = append(out, byte(uint64(i&mask)>>shiftbits))
	}
	return out
}

func TestAppendVLongGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    int64
		hex  string // "" means: compare with javaWriteVLong only
	}{
		{"zero", 0, "00"},
		{"one", 1, "01"},
		{"max single byte", 127, "7f"},
		{"min single byte", -112, "90"},
		{"minus one", -1, "ff"},
		{"128", 128, "8f80"},
		{"-113", -113, "8770"},
		{"255", 255, "8fff"},
		{"256", 256, "8e0100"},
		{"1000", 1000, "8e03e8"},
		{"65535", 65535, "8effff"},
		{"65536", 65536, "8d010000"},
		{"-256", -256, "87ff"},
		{"-257", -257, "860100"},
		{"1<<31", 1 << 31, "8c80000000"},
		{"-1<<31", -1 << 31, "847fffffff"},
		{"MaxInt32", math.MaxInt32, "8c7fffffff"},
		{"MaxInt64", math.MaxInt64, "887fffffffffffffff"},
		{"MinInt64", math.MinInt64, "807fffffffffffffff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := AppendVLong(nil, tt.v)
			if want := javaWriteVLong(tt.v); !bytes.Equal(got, want) {
				t.Fatalf("AppendVLong(%d) = %x, Java algorithm gives %x", tt.v, got, want)
			}
			if tt.hex != "" && hex.EncodeToString(got) != tt.hex {
				t.Fatalf("AppendVLong(%d) = %x, want %s", tt.v, got, tt.hex)
			}
			if n := VLongSize(tt.v); n != len(got) {
				t.Fatalf("VLongSize(%d) = %d, want %d", tt.v, n, len(got))
			}
			back, err := ReadVLong(bytes.NewReader(got))
			if err != nil || back != tt.v {
				t.Fatalf("ReadVLong(%x) = %d, %v; want %d", got, back, err, tt.v)
			}
		})
	}
}

func TestVLongMatchesJavaRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := int64(r.Uint64()) >> r.IntN(64)
		if got, want := AppendVLong(nil, v), javaWriteVLong(v); !bytes.Equal(got, want) {
			t.Fatalf("AppendVLong(%d) = %x, Java algorithm gives %x", v, got, want)
		}
	}
}

func TestReadVLong(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		hex     string
		want    int64
		wantErr error
	}{
		{"empty", "", 0, io.EOF},
		{"truncated positive", "8e01", 0, io.ErrUnexpectedEOF},
		{"truncated negative", "80ffffff", 0, io.ErrUnexpectedEOF},
		{"non-minimal accepted like Hadoop", "8e0005", 5, nil},
		{"non-minimal negative", "8700", -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _ := hex.DecodeString(tt.hex)
			got, err := ReadVLong(bytes.NewReader(b))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("ReadVLong(%s) = %d, %v; want %d, %v", tt.hex, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadVIntRange(t *testing.T) {
	t.Parallel()
	for _, v := range []int64{math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64} {
		if _, err := ReadVInt(bytes.NewReader(AppendVLong(nil, v))); !errors.Is(err, ErrVIntRange) {
			t.Errorf("ReadVInt(%d) error = %v, want ErrVIntRange", v, err)
		}
	}
	for _, v := range []int64{math.MaxInt32, math.MinInt32, 0} {
		if got, err := ReadVInt(bytes.NewReader(AppendVLong(nil, v))); err != nil || int64(got) != v {
			t.Errorf("ReadVInt(%d) = %d, %v", v, got, err)
		}
	}
}

func FuzzVLong(f *testing.F) {
	for _, v := range []int64{0, -112, 127, 128, -113, 255, 256, 65535, 1 << 31, -1 << 31, math.MaxInt64, math.MinInt64} {
		f.Add(AppendVLong(nil, v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		v, err := ReadVLong(r)
		if err != nil {
			return
		}
		used := len(b) - r.Len()
		enc := AppendVLong(nil, v)
		if !bytes.Equal(enc, javaWriteVLong(v)) {
			t.Fatalf("AppendVLong(%d) = %x, Java algorithm gives %x", v, enc, javaWriteVLong(v))
		}
		if len(enc) > used {
			t.Fatalf("canonical encoding %x of %d longer than input %x", enc, v, b[:used])
		}
		back, err := ReadVLong(bytes.NewReader(enc))
		if err != nil || back != v {
			t.Fatalf("round trip of %d: got %d, %v", v, back, err)
		}
	})
}
