package creds

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrVIntRange reports a VInt whose value does not fit in 32 bits.
var ErrVIntRange = errors.New("creds: vint out of int32 range")

// AppendVLong appends v to b in Hadoop's zero-compressed variable-length
// encoding (WritableUtils.writeVLong) and returns the extended slice.
//
// This is not a protobuf varint:
//
//	-112 <= v <= 127:  one byte, v itself
//	otherwise:         first byte = base - n, then n bytes of x big-endian, where
//	                   x = v, base = -112   if v >= 0
//	                   x = ^v, base = -120  if v < 0
//	                   n = number of significant bytes of x (1..8)
func AppendVLong(b []byte, v int64) []byte {
	if v >= -112 && v <= 127 {
		return append(b, byte(v))
	}
	base := -112
	x := uint64(v)
	if v < 0 {
		x = ^x
		base = -120
	}
	n := 0
	for t := x; t != 0; t >>= 8 {
		n++
	}
	b = append(b, byte(int8(base-n)))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(x>>(8*uint(i))))
	}
	return b
}

// VLongSize returns the number of bytes AppendVLong uses for v.
func VLongSize(v int64) int {
	if v >= -112 && v <= 127 {
		return 1
	}
	x := uint64(v)
	if v < 0 {
		x = ^x
	}
	n := 1
	for ; x != 0; x >>= 8 {
		n++
	}
	return n
}

// ReadVLong reads one Hadoop VLong (WritableUtils.readVLong). Like Hadoop, it
// accepts non-minimal encodings. A stream that ends inside the value yields
// io.ErrUnexpectedEOF; one that ends before it yields io.EOF.
func ReadVLong(r io.ByteReader) (int64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	first := int8(c)
	if first >= -112 {
		return int64(first), nil
	}
	var n int
	negative := first < -120
	if negative {
		n = -120 - int(first) // -121 → 1 ... -128 → 8
	} else {
		n = -112 - int(first) // -113 → 1 ... -120 → 8
	}
	var x uint64
	for range n {
		c, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		x = x<<8 | uint64(c)
	}
	if negative {
		x = ^x
	}
	return int64(x), nil
}

// ReadVInt reads a Hadoop VInt (WritableUtils.readVInt): a VLong that must
// fit in an int32.
func ReadVInt(r io.ByteReader) (int32, error) {
	v, err := ReadVLong(r)
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d", ErrVIntRange, v)
	}
	return int32(v), nil
}
