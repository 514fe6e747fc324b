package psnode

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Compression of a KV app's data frames (WithCompression, TableSpec's
// Compress): lossless, so that a server's handler sees exactly the keys
// and values a worker pushed and a worker gets exactly the values a
// server answered. A compressed message says so in its meta
// (transport.Meta.Filters, filterCompress), so the receiver needs no
// configuration: a server answers a compressed pull compressed and a
// plain one plain.
//
// Every non-empty data frame of a compressed message starts with a codec
// byte:
//
//	+------+---------------------------------+
//	| 0x00 | the frame's bytes, as they are  |   compression did not pay
//	+------+-----------+---------------------+
//	| 0x01 | uvarint n | zstd frame          |   n: the decoded size
//	+------+-----------+---------------------+
//
// A decoder refuses n above MaxCompressedFrame and never decodes more
// than n bytes. The keys frame, once decoded, is a form byte, the number
// of keys n as a uvarint and the keys: form 1, n little-endian uint64s;
// form 2, n uvarints, the first key and then the gaps to the next, which
// must ascend strictly (the keys of a request always do); form 3, with
// key caching, a reference to a list the server keeps, and bit 0x10 of
// forms 1 and 2 asks the server to keep the list (keycache.go). Values frames
// hold the values' little-endian bytes, as uncompressed.
//
// Compression is klauspost/compress's zstd, in Go: no second C library
// beside libzmq, and on delta-encoded keys and float frames it packs
// tighter than snappy at a speed the network saving pays for. With
// WithDeltaKeys the keys go as gaps and every frame stored (filterStored):
// on loopback, or under CURVE, whose cipher costs by the byte, fewer bytes
// for almost no CPU pays better than zstd's ratio.

// Filter bits in transport.Meta.Filters.
const (
	filterCompress int32 = 1 << 1
	filterKeyCache int32 = 1 << 2 // with filterCompress: see keycache.go
	// filterStored, with filterCompress, marks a message whose frames
	// are all stored, none through zstd (WithDeltaKeys): the keys still
	// go as gaps. A server answers such a request the same way.
	filterStored int32 = 1 << 3
	// knownFilters are the filter bits this node decodes.
	knownFilters = filterCompress | filterKeyCache | filterStored
)

// MaxCompressedFrame bounds what one data frame decodes to.
const MaxCompressedFrame = 256 << 20

// Frame codec bytes.
const (
	frameStored byte = 0
	frameZstd   byte = 1
	// minCompressFrame is the smallest frame worth compressing.
	minCompressFrame = 64
)

// Keys frame forms: the low four bits say how the list is written, bit
// 0x10 asks the server to keep it (key caching).
const (
	keysRaw   byte = 1
	keysDelta byte = 2
	keysRef   byte = 3 // a list the server keeps: see keycache.go
	keysKind  byte = 0x0f
	keysStore byte = 0x10
	// maxFrameKeys bounds the keys of one keys frame.
	maxFrameKeys = MaxCompressedFrame / 8
)

// zstdWindow is the compressor's window, and the largest a decoder
// accepts: a frame cannot make it reserve more.
const zstdWindow = 8 << 20

// zstdMaxBlock is the most a zstd block decodes to; every block takes at
// least zstdMinBlock bytes (its header), so n bytes of zstd decode to at
// most (n/zstdMinBlock+1)·zstdMaxBlock bytes, whatever a header claims.
const (
	zstdMaxBlock = 128 << 10
	zstdMinBlock = 3
)

// maxCompressedFrames bounds the data frames of a compressed message: a
// KV request or answer has keys, values and lens at most.
const maxCompressedFrames = 3

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// zstdCodec returns the process's zstd encoder and decoder, both safe for
// concurrent EncodeAll and DecodeAll and running no goroutines of their
// own.
func zstdCodec() (*zstd.Encoder, *zstd.Decoder, error) {
	zstdOnce.Do(func() {
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdWindow))
		if zstdErr != nil {
			return
		}
		zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdWindow),
			zstd.WithDecoderMaxMemory(MaxCompressedFrame), zstd.WithDecodeAllCapLimit(true))
	})
	return zstdEnc, zstdDec, zstdErr
}

// appendFrame appends b to dst in the frame format: with its codec byte,
// compressed when zstd is asked for and makes it smaller. An empty frame
// stays empty.
func appendFrame(dst, b []byte, zstd bool) ([]byte, error) {
	if len(b) == 0 {
		return dst, nil
	}
	if zstd && len(b) >= minCompressFrame {
		enc, _, err := zstdCodec()
		if err != nil {
			return dst, fmt.Errorf("psnode: zstd: %w", err)
		}
		start := len(dst)
		dst = append(dst, frameZstd)
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = enc.EncodeAll(b, dst)
		if len(dst)-start <= len(b) {
			return dst, nil
		}
		dst = dst[:start]
	}
	return append(append(dst, frameStored), b...), nil
}

// decodeFrame returns the bytes a frame in the frame format holds: a view
// of b when stored, a new buffer of at most MaxCompressedFrame bytes when
// compressed.
func decodeFrame(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	switch b[0] {
	case frameStored:
		return b[1:], nil
	case frameZstd:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 {
			return nil, fmt.Errorf("%w: compressed frame without its size", transport.ErrMalformed)
		}
		if n > MaxCompressedFrame {
			return nil, fmt.Errorf("%w: compressed frame of %d bytes exceeds the %d-byte limit", transport.ErrMalformed, n, MaxCompressedFrame)
		}
		// The size sizes the buffer below: it must be one the frame can
		// hold, not only one under the limit.
		if z := len(b) - 1 - k; n > uint64(z/zstdMinBlock+1)*zstdMaxBlock {
			return nil, fmt.Errorf("%w: compressed frame of %d bytes says it holds %d", transport.ErrMalformed, z, n)
		}
		_, dec, err := zstdCodec()
		if err != nil {
			return nil, fmt.Errorf("psnode: zstd: %w", err)
		}
		// The cap limit stops the decoder at n bytes.
		out, err := dec.DecodeAll(b[1+k:], make([]byte, 0, n))
		if err != nil {
			return nil, fmt.Errorf("%w: compressed frame: %v", transport.ErrMalformed, err)
		}
		if uint64(len(out)) != n {
			return nil, fmt.Errorf("%w: compressed frame holds %d bytes, its header says %d", transport.ErrMalformed, len(out), n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: frame codec %d", transport.ErrMalformed, b[0])
}

// appendKeys appends a keys frame's contents: delta-encoded when the keys
// ascend strictly, raw otherwise; with the store bit when store.
func appendKeys(dst []byte, keys []uint64, store bool) []byte {
	delta := true
	for i := 1; i < len(keys) && delta; i++ {
		delta = keys[i] > keys[i-1]
	}
	var bit byte
	if store {
		bit = keysStore
	}
	if !delta {
		dst = append(dst, keysRaw|bit)
		dst = binary.AppendUvarint(dst, uint64(len(keys)))
		return append(dst, asBytes(keys)...)
	}
	dst = append(dst, keysDelta|bit)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	prev := uint64(0)
	for _, k := range keys {
		dst = binary.AppendUvarint(dst, k-prev)
		prev = k
	}
	return dst
}

// parseGaps reads n keys written as gaps (uvarints: the first key, then
// the gap to each next one, which must not be 0) that fill b exactly.
// Gaps of one and two bytes, the common ones, are read without
// binary.Uvarint's general loop.
func parseGaps(b []byte, n int) ([]uint64, error) {
	keys := make([]uint64, n)
	prev, at := uint64(0), 0
	for i := range keys {
		var d uint64
		switch {
		case at < len(b) && b[at] < 0x80:
			d = uint64(b[at])
			at++
		case at+1 < len(b) && b[at+1] < 0x80:
			d = uint64(b[at]&0x7f) | uint64(b[at+1])<<7
			at += 2
		default:
			var k int
			if d, k = binary.Uvarint(b[at:]); k <= 0 {
				return nil, fmt.Errorf("%w: keys frame: key %d of %d is cut short", transport.ErrMalformed, i, n)
			}
			at += k
		}
		if d == 0 && i > 0 {
			return nil, fmt.Errorf("%w: keys frame: key %d repeats key %d", transport.ErrMalformed, i, i-1)
		}
		if d > math.MaxUint64-prev {
			return nil, fmt.Errorf("%w: keys frame: key %d overflows", transport.ErrMalformed, i)
		}
		prev += d
		keys[i] = prev
	}
	if at != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes in a keys frame", transport.ErrMalformed, len(b)-at)
	}
	return keys, nil
}

// keysFrame is a parsed keys frame: keys written out, or a reference to a
// list the server keeps; and whether to keep the list.
type keysFrame struct {
	keys  []uint64
	ref   bool
	sig   keySig // ref: the list referred to
	store bool
}

// parseKeys parses a keys frame's contents. Keys written out are a new
// slice, whose length is bounded by the frame's (each key takes at least
// a byte).
func parseKeys(b []byte) (keysFrame, error) {
	var f keysFrame
	if len(b) == 0 {
		return f, nil
	}
	form := b[0]
	if form&^(keysKind|keysStore) != 0 {
		return f, fmt.Errorf("%w: keys frame form %#x", transport.ErrMalformed, form)
	}
	f.store = form&keysStore != 0
	n64, k := binary.Uvarint(b[1:])
	if k <= 0 {
		return f, fmt.Errorf("%w: keys frame without its length", transport.ErrMalformed)
	}
	if n64 > maxFrameKeys {
		return f, fmt.Errorf("%w: keys frame of %d keys exceeds the limit of %d", transport.ErrMalformed, n64, maxFrameKeys)
	}
	n, rest := int(n64), b[1+k:]
	switch form & keysKind {
	case keysRef:
		if f.store {
			return f, fmt.Errorf("%w: keys frame asks to keep a reference", transport.ErrMalformed)
		}
		if len(rest) != len(f.sig.h) {
			return f, fmt.Errorf("%w: keys frame reference of %d bytes", transport.ErrMalformed, len(rest))
		}
		f.ref, f.sig.n = true, n
		copy(f.sig.h[:], rest)
	case keysRaw:
		if len(rest) != 8*n {
			return f, fmt.Errorf("%w: keys frame holds %d bytes for %d keys", transport.ErrMalformed, len(rest), n)
		}
		f.keys = make([]uint64, n)
		for i := range f.keys {
			f.keys[i] = binary.LittleEndian.Uint64(rest[8*i:])
		}
	case keysDelta:
		if len(rest) < n {
			return f, fmt.Errorf("%w: keys frame claims %d keys in %d bytes", transport.ErrMalformed, n, len(rest))
		}
		var err error
		if f.keys, err = parseGaps(rest, n); err != nil {
			return f, err
		}
	default:
		return f, fmt.Errorf("%w: keys frame form %#x", transport.ErrMalformed, form)
	}
	return f, nil
}

// compressFrames replaces a KV message's frames, keys first, by their
// compressed form and marks the message: the keys as gaps, and every frame
// through zstd when zstd, else stored (filterStored). keys, when not nil,
// is the keys frame's contents already written (key caching); else the
// keys frame is written out.
func compressFrames(m *transport.Message, keys []byte, zstd bool) error {
	out := make([][]byte, len(m.Data))
	for i, d := range m.Data {
		switch {
		case i == 0 && keys != nil:
			d = keys
		case i == 0 && len(d) > 0:
			ks, err := fromBytes[uint64](d)
			if err != nil {
				return err
			}
			d = appendKeys(make([]byte, 0, len(d)/2+16), ks, false)
		}
		var err error
		if out[i], err = appendFrame(nil, d, zstd); err != nil {
			return err
		}
	}
	m.Data = out
	for i := range m.Meta.DataTypes {
		m.Meta.DataTypes[i] = transport.TypeChar
	}
	m.Meta.Filters |= filterCompress
	if !zstd {
		m.Meta.Filters |= filterStored
	}
	return nil
}

// decompressFrames undoes compressFrames on a received message: the keys
// frame becomes little-endian uint64s again (empty for a reference to a
// kept list, which the returned keysFrame describes), the others their
// bytes.
func decompressFrames(m *transport.Message) (keysFrame, error) {
	var kf keysFrame
	if m.Meta.Filters == 0 {
		return kf, nil
	}
	if m.Meta.Filters&filterCompress == 0 || m.Meta.Filters&^knownFilters != 0 {
		return kf, fmt.Errorf("%w: filters %#x, of which this node knows compression, stored frames and key caching", transport.ErrMalformed, m.Meta.Filters)
	}
	if len(m.Data) > maxCompressedFrames {
		return kf, fmt.Errorf("%w: compressed message of %d data frames, at most %d", transport.ErrMalformed, len(m.Data), maxCompressedFrames)
	}
	out := make([][]byte, len(m.Data))
	for i, d := range m.Data {
		b, err := decodeFrame(d)
		if err != nil {
			return kf, fmt.Errorf("data frame %d: %w", i, err)
		}
		if i == 0 && len(b) > 0 {
			if kf, err = parseKeys(b); err != nil {
				return kf, err
			}
			if (kf.ref || kf.store) && m.Meta.Filters&filterKeyCache == 0 {
				return kf, fmt.Errorf("%w: a keys frame of the key cache without its filter bit", transport.ErrMalformed)
			}
			b = asBytes(kf.keys)
		}
		out[i] = b
	}
	m.Data = out
	return kf, nil
}
