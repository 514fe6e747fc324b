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
// n is one byte and the lengths are unsigned varints, len(meta) as long
// as puts data0 8-byte aligned (pack). The receiver's data frames are
// slices of the one frame it received, with no copy.
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

// pack appends the packed form of meta and data to dst, which starts the
// packed frame at len(dst). meta's length is written in as many bytes as
// put the first data frame at a multiple of 8 bytes from the frame's
// start (a varint may take more bytes than it needs, and unpack reads it
// all the same). A receiver's frame starts at such a boundary, as Go's
// allocations of more than 8 bytes do, so it reads keys and values in
// place instead of copying them to aligned memory first (psnode's
// fromBytes). A frame after the first keeps the alignment when the ones
// before it are whole numbers of 8 bytes, as key frames are.
func pack(dst, meta []byte, data [][]byte) []byte {
	head := len(ctlPacked) + 1 + uvarintLen(uint64(len(meta))) + len(meta)
	for _, d := range data {
		head += uvarintLen(uint64(len(d)))
	}
	dst = append(dst, ctlPacked...)
	dst = append(dst, byte(len(data)))
	dst = appendUvarintPadded(dst, uint64(len(meta)), -head&7)
	for _, d := range data {
		dst = binary.AppendUvarint(dst, uint64(len(d)))
	}
	dst = append(dst, meta...)
	for _, d := range data {
		dst = append(dst, d...)
	}
	return dst
}

// uvarintLen is the length of v's shortest varint.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// appendUvarintPadded appends v as a varint of extra bytes more than its
// shortest (continuation bytes of zero bits), within
// binary.MaxVarintLen64; beyond that it appends the shortest.
func appendUvarintPadded(dst []byte, v uint64, extra int) []byte {
	n := uvarintLen(v) + extra
	if n > binary.MaxVarintLen64 {
		return binary.AppendUvarint(dst, v)
	}
	for range n - 1 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
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
