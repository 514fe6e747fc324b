package collective

import (
	"encoding/binary"
	"unsafe"
)

// littleEndian is true on the hosts whose memory layout is the wire's:
// elements are then sent from and read into buffers without conversion.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// elemOf returns the wire type of T.
func elemOf[T Elem]() elemType {
	var one T = 1
	switch {
	case unsafe.Sizeof(one) == 4:
		return elemF32
	case one/2 == 0: // integer division
		return elemI64
	}
	return elemF64
}

// wireBytes returns s as little-endian bytes: s's own memory on a
// little-endian host, a converted copy elsewhere.
func wireBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	size := int(unsafe.Sizeof(s[0]))
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*size)
	}
	out := make([]byte, len(s)*size)
	for i := range s {
		p := unsafe.Pointer(&s[i])
		if size == 4 {
			binary.LittleEndian.PutUint32(out[4*i:], *(*uint32)(p))
		} else {
			binary.LittleEndian.PutUint64(out[8*i:], *(*uint64)(p))
		}
	}
	return out
}

// elems returns little-endian bytes b (a multiple of T's size) as
// elements: b's own memory when the host is little-endian and b is
// aligned for T, a converted copy otherwise.
func elems[T Elem](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := len(b) / size
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]T, n)
	for i := range out {
		p := unsafe.Pointer(&out[i])
		if size == 4 {
			*(*uint32)(p) = binary.LittleEndian.Uint32(b[4*i:])
		} else {
			*(*uint64)(p) = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	return out
}

// combine sets dst[i] = in[i] op dst[i] when inFirst, dst[i] op in[i]
// otherwise: the operand order is fixed by the caller (by rank), never by
// arrival. Mean combines as Sum; finish divides.
func combine[T Elem](dst, in []T, op Op, inFirst bool) {
	in = in[:len(dst)]
	switch op {
	case Sum, Mean:
		if inFirst {
			for i := range dst {
				dst[i] = in[i] + dst[i]
			}
		} else {
			for i := range dst {
				dst[i] += in[i]
			}
		}
	case Max:
		if inFirst {
			for i := range dst {
				dst[i] = max(in[i], dst[i])
			}
		} else {
			for i := range dst {
				dst[i] = max(dst[i], in[i])
			}
		}
	case Min:
		if inFirst {
			for i := range dst {
				dst[i] = min(in[i], dst[i])
			}
		} else {
			for i := range dst {
				dst[i] = min(dst[i], in[i])
			}
		}
	}
}

// finish turns a sum into a mean: division by the group size (integer
// division for integers).
func finish[T Elem](buf []T, op Op, size int) {
	if op != Mean {
		return
	}
	d := T(size)
	for i := range buf {
		buf[i] /= d
	}
}
