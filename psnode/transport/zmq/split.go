package zmq

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	zmq4 "github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/psnode/internal/pages"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// Bounded frames: libzmq reads a frame whole before anything checks it,
// the frames of a connection's handshake included, so a stranger who
// reaches a port, with no key, could have a node hold as much as it
// sends in one frame until the handshake's time runs out. With CURVE,
// every socket of the transport takes frames of a bounded size
// (ZMQ_MAXMSGSIZE): the ROUTERs maxFrame bytes of content, the DEALERs
// maxAnswer. The frames a node sends keep to it: a meta is at most
// transport.MaxMetaSize, a larger data frame is pieced on the sealed
// route (sealed.go), and through CURVE it is split: its pieces follow
// each other in the message, in the frame's place, and a frame before
// the meta names the frames split:
//
//	[split: (index, length)…][meta][data0]…[piece][piece]…[dataN]
//
// The receiver joins the pieces into new memory.
const (
	// maxFrame bounds a frame's content on a transport with CURVE: the
	// largest meta.
	maxFrame = transport.MaxMetaSize
	// curveOverhead is what CURVE adds to a frame on the wire (its
	// MESSAGE command's name and nonce, the box's MAC and a flags byte:
	// 33 bytes), with room to spare.
	curveOverhead = 256
	// maxAnswer bounds a frame a DEALER takes with CURVE: the answer to
	// ctlHello, and the handshake's own.
	maxAnswer = 64 << 10
	// maxSplitPieces bounds the pieces of a split message.
	maxSplitPieces = 1 << 12
	// maxSplitFrame bounds the length a split frame may announce.
	maxSplitFrame = maxSplitPieces * maxFrame
)

var ctlSplit = []byte("\x00spindle:split:")

// splitFrame is a data frame split into pieces: its index among the
// message's data frames, and its length.
type splitFrame struct {
	index  int
	length int
}

// boundFrames sets ZMQ_MAXMSGSIZE on s, not yet bound or connected, with
// CURVE: n bytes of content, CURVE's own besides.
func (t *Transport) boundFrames(s *zmq4.Socket, n int) error {
	if t.opts.Curve == nil {
		return nil
	}
	if err := s.SetMaxmsgsize(int64(n + curveOverhead)); err != nil {
		return fmt.Errorf("set ZMQ_MAXMSGSIZE: %w", err)
	}
	return nil
}

// splitData returns the split frame and the frames to send in place of
// data, with every data frame over max bytes cut in pieces of max bytes;
// a nil split frame when none is.
func splitData(data [][]byte, max int) ([]byte, [][]byte, error) {
	var split []splitFrame
	for i, d := range data {
		if len(d) > max {
			split = append(split, splitFrame{index: i, length: len(d)})
		}
	}
	if len(split) == 0 {
		return nil, data, nil
	}
	frames := make([][]byte, 0, len(data))
	for _, d := range data {
		if len(d) <= max {
			frames = append(frames, d)
			continue
		}
		for lo := 0; lo < len(d); lo += max {
			frames = append(frames, d[lo:min(lo+max, len(d))])
		}
	}
	if n := len(frames) - len(data) + len(split); n > maxSplitPieces {
		return nil, nil, fmt.Errorf("%w: a message of %d pieces of %d bytes exceeds the limit of %d", transport.ErrMalformed, n, max, maxSplitPieces)
	}
	b := append([]byte(nil), ctlSplit...)
	b = append(b, byte(len(split)))
	for _, s := range split {
		b = append(b, byte(s.index))
		b = binary.LittleEndian.AppendUint64(b, uint64(s.length))
	}
	return b, frames, nil
}

// decodeSplit decodes a split frame. Every length is bounded: at most
// transport.MaxDataFrames frames, at increasing indices below that
// limit, each of 1 to maxSplitFrame bytes.
func decodeSplit(b []byte) ([]splitFrame, error) {
	rest, ok := bytes.CutPrefix(b, ctlSplit)
	if !ok || len(rest) < 1 {
		return nil, fmt.Errorf("%w: not a split frame", transport.ErrMalformed)
	}
	n := int(rest[0])
	rest = rest[1:]
	if n == 0 || n > transport.MaxDataFrames || len(rest) != 9*n {
		return nil, fmt.Errorf("%w: split frame of %d frames in %d bytes", transport.ErrMalformed, n, len(rest))
	}
	split := make([]splitFrame, n)
	for i := range split {
		idx := int(rest[9*i])
		length := binary.LittleEndian.Uint64(rest[9*i+1:])
		switch {
		case idx >= transport.MaxDataFrames:
			return nil, fmt.Errorf("%w: split frame index %d", transport.ErrMalformed, idx)
		case i > 0 && idx <= split[i-1].index:
			return nil, fmt.Errorf("%w: split frame indices out of order", transport.ErrMalformed)
		case length == 0 || length > maxSplitFrame:
			return nil, fmt.Errorf("%w: split frame of %d bytes", transport.ErrMalformed, length)
		}
		split[i] = splitFrame{index: idx, length: int(length)}
	}
	return split, nil
}

// joinSplit joins the pieces of the frames that split names, in frames
// (the data frames as received, pieces in their frame's place), into new
// memory; it returns the message's data frames.
func joinSplit(split []splitFrame, frames [][]byte) ([][]byte, error) {
	// Where each data frame's pieces are in frames, checked before any
	// memory is taken.
	type span struct{ lo, hi int }
	var spans []span
	next := 0
	for k := 0; k < len(frames); {
		if next < len(split) && split[next].index == len(spans) {
			lo, got := k, 0
			for got < split[next].length {
				if k == len(frames) || len(frames[k]) == 0 {
					return nil, fmt.Errorf("%w: split frame %d of %d bytes has %d", transport.ErrMalformed, split[next].index, split[next].length, got)
				}
				got += len(frames[k])
				k++
			}
			if got != split[next].length {
				return nil, fmt.Errorf("%w: split frame %d of %d bytes has %d", transport.ErrMalformed, split[next].index, split[next].length, got)
			}
			spans = append(spans, span{lo, k})
			next++
			continue
		}
		spans = append(spans, span{k, k + 1})
		k++
	}
	if next != len(split) {
		return nil, fmt.Errorf("%w: split frame %d of a message of %d data frames", transport.ErrMalformed, split[next].index, len(spans))
	}
	data := make([][]byte, len(spans))
	for i, s := range spans {
		if s.hi-s.lo == 1 && !slices.ContainsFunc(split, func(f splitFrame) bool { return f.index == i }) {
			data[i] = frames[s.lo]
			continue
		}
		n := 0
		for _, f := range frames[s.lo:s.hi] {
			n += len(f)
		}
		b := make([]byte, n)
		pages.Advise(b, 4<<10, pages.Populate)
		at := 0
		for _, f := range frames[s.lo:s.hi] {
			at += copy(b[at:], f)
		}
		data[i] = b
	}
	return data, nil
}
