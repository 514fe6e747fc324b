package zmq

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Packed messages: a small message goes as one ZeroMQ frame rather than
// one per part. Each frame costs ZeroMQ a message of its own on both
// sides, and with CURVE its own encryption and MAC; a push of a few
// hundred keys is three frames. A peer that answered ctlHello reads
// packed messages, and every message to it whose frames add up to less
// than packMax bytes is packed:
//
//	[ctlPacked][n][len(meta)][len(data0)]…[len(dataN-1)][meta][data0]…[dataN-1]
//
// n is one byte and the lengths are unsigned varints. The receiver's data
// frames are slices of the one frame it received, with no copy.
var ctlPacked = []byte{0, 'p'}

// packMax is the size below which a message is packed.
const packMax = minBorrowed

var packPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 4096)
	return &b
}}

// packable reports whether a message of meta and data is packed.
func packable(meta []byte, data [][]byte) bool {
	if len(data) == 0 || len(data) > transport.MaxDataFrames {
		return false
	}
	n := len(meta)
	for _, d := range data {
		n += len(d)
	}
	return n < packMax
}

// pack appends the packed form of meta and data to dst.
func pack(dst, meta []byte, data [][]byte) []byte {
	dst = append(dst, ctlPacked...)
	dst = append(dst, byte(len(data)))
	dst = binary.AppendUvarint(dst, uint64(len(meta)))
	for _, d := range data {
		dst = binary.AppendUvarint(dst, uint64(len(d)))
	}
	dst = append(dst, meta...)
	for _, d := range data {
		dst = append(dst, d...)
	}
	return dst
}

// unpack splits a packed frame into the meta and data frames, slices of
// b. The lengths must add up to b's exactly; an error wraps
// transport.ErrMalformed.
func unpack(b []byte) (meta []byte, data [][]byte, err error) {
	rest := b[len(ctlPacked):]
	if len(rest) < 1 {
		return nil, nil, fmt.Errorf("%w: packed message of %d bytes", transport.ErrMalformed, len(b))
	}
	n := int(rest[0])
	rest = rest[1:]
	if n == 0 || n > transport.MaxDataFrames {
		return nil, nil, fmt.Errorf("%w: packed message of %d data frames", transport.ErrMalformed, n)
	}
	lens := make([]int, n+1)
	total := 0
	for i := range lens {
		v, k := binary.Uvarint(rest)
		if k <= 0 || v > uint64(len(b)) {
			return nil, nil, fmt.Errorf("%w: packed message: length %d does not decode", transport.ErrMalformed, i)
		}
		lens[i] = int(v)
		total += int(v)
		rest = rest[k:]
	}
	if total != len(rest) {
		return nil, nil, fmt.Errorf("%w: packed message: frames of %d bytes in %d", transport.ErrMalformed, total, len(rest))
	}
	meta, rest = rest[:lens[0]:lens[0]], rest[lens[0]:]
	data = make([][]byte, n)
	for i := range data {
		l := lens[i+1]
		data[i], rest = rest[:l:l], rest[l:]
	}
	return meta, data, nil
}
