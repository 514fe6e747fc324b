package psnode

import (
	"fmt"
	"unsafe"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Number is the element type of KV values.
type Number interface{ ~float32 | ~float64 }

// Data frames are little-endian arrays. On a little-endian machine (every
// platform Go's runtime supports for Spindle: amd64, arm64, ppc64le,
// riscv64) they are the Go slices themselves, reinterpreted without a copy.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

func init() {
	if !littleEndian {
		panic("psnode: big-endian platforms are not supported: data frames are little-endian arrays sent without conversion")
	}
}

// asBytes views a slice of fixed-size elements as bytes, without copying.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

// fromBytes views b as a slice of T without copying when b is aligned for
// T, and copies otherwise. It fails when len(b) is not a multiple of T's
// size.
func fromBytes[T any](b []byte) ([]T, error) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%w: frame of %d bytes is not a whole number of %d-byte elements", transport.ErrMalformed, len(b), size)
	}
	if len(b) == 0 {
		return nil, nil
	}
	n := len(b) / size
	if uintptr(unsafe.Pointer(&b[0]))%uintptr(unsafe.Alignof(zero)) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), nil
	}
	out := make([]T, n)
	copy(asBytes(out), b)
	return out, nil
}

// checkElem refuses frame i of m when it says it holds the other element
// type than V: a peer that declares the table with another element type,
// whose values would otherwise be read as twice or half as many. A frame
// of another type (compressed frames say TypeChar) is not judged here.
func checkElem[V Number](m *transport.Message, i int) error {
	if i >= len(m.Meta.DataTypes) {
		return nil
	}
	t := m.Meta.DataTypes[i]
	if t == typeOf[V]() || (t != transport.TypeFloat32 && t != transport.TypeFloat64) {
		return nil
	}
	got := "float32"
	if t == transport.TypeFloat64 {
		got = "float64"
	}
	return fmt.Errorf("%w: values of %s for a table of %s: every role must declare the table alike", transport.ErrMalformed, got, elemName[V]())
}

// typeOf returns the wire data type of V.
func typeOf[V Number]() transport.DataType {
	var v V
	if unsafe.Sizeof(v) == 4 {
		return transport.TypeFloat32
	}
	return transport.TypeFloat64
}
