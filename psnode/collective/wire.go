package collective

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// A collective message is a psnode data message of the group's app. Its
// Meta.Body is a fixed header (headerLen bytes, little-endian):
//
//	[0]     version (1)
//	[1]     kind: which collective (kindAllReduce...)
//	[2]     element type (elemNone, elemF32, elemF64, elemI64)
//	[3]     op (Sum, Mean, Max, Min)
//	[4:12]  seq: the collective's number in the group, from 1
//	[12:16] step: the algorithm's step
//	[16:20] chunk: the chunk's number within the step
//	[20:28] count: the length of the caller's buffer, in elements
//
// and its data, when it carries elements, is one frame of them,
// little-endian, with the matching transport.DataType.
const (
	headerLen   = 28
	wireVersion = 1
	// maxCount bounds the element count a header may announce: 2^40
	// elements, far beyond any buffer a process holds.
	maxCount = 1 << 40
)

// kind says which collective a message belongs to.
type kind uint8

const (
	kindAllReduce kind = iota + 1
	kindBroadcast
	kindReduce
	kindReduceScatter
	kindAllGather
	kindBarrier
	// kindAbort tells the other members that this one gave up the
	// group; its data is the reason, text of at most maxReason bytes.
	kindAbort
	kindMax = kindAbort
)

// maxReason bounds the reason text of an abort.
const maxReason = 1024

func (k kind) String() string {
	switch k {
	case kindAllReduce:
		return "AllReduce"
	case kindBroadcast:
		return "Broadcast"
	case kindReduce:
		return "Reduce"
	case kindReduceScatter:
		return "ReduceScatter"
	case kindAllGather:
		return "AllGather"
	case kindBarrier:
		return "Barrier"
	case kindAbort:
		return "Abort"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// elemType names an element type on the wire.
type elemType uint8

const (
	elemNone elemType = iota
	elemF32
	elemF64
	elemI64
	elemMax = elemI64
)

func (t elemType) String() string {
	switch t {
	case elemNone:
		return "none"
	case elemF32:
		return "float32"
	case elemF64:
		return "float64"
	case elemI64:
		return "int64"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

func (t elemType) size() int {
	switch t {
	case elemF32:
		return 4
	case elemF64, elemI64:
		return 8
	}
	return 0
}

func (t elemType) dataType() transport.DataType {
	switch t {
	case elemF32:
		return transport.TypeFloat32
	case elemF64:
		return transport.TypeFloat64
	case elemI64:
		return transport.TypeInt64
	}
	return transport.TypeOther
}

func (o Op) String() string {
	switch o {
	case Sum:
		return "Sum"
	case Mean:
		return "Mean"
	case Max:
		return "Max"
	case Min:
		return "Min"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

func (o Op) valid() bool { return o >= Sum && o <= Min }

// header is the decoded fixed header of a collective message.
type header struct {
	kind  kind
	elem  elemType
	op    Op
	seq   uint64
	step  uint32
	chunk uint32
	count uint64
}

// describe says what collective a header belongs to, for errors about
// members that called different collectives.
func (h header) describe() string {
	s := fmt.Sprintf("%s #%d of %d %s", h.kind, h.seq, h.count, h.elem)
	if h.kind == kindAllReduce || h.kind == kindReduce || h.kind == kindReduceScatter {
		s += " " + h.op.String()
	}
	return s
}

func (h header) appendTo(b []byte) []byte {
	b = append(b, wireVersion, byte(h.kind), byte(h.elem), byte(h.op))
	b = binary.LittleEndian.AppendUint64(b, h.seq)
	b = binary.LittleEndian.AppendUint32(b, h.step)
	b = binary.LittleEndian.AppendUint32(b, h.chunk)
	return binary.LittleEndian.AppendUint64(b, h.count)
}

var errMalformed = errors.New("malformed collective message")

// decode checks a received message's header and data against the
// format: every length is bounded and every enumeration known. It does
// not know what the receiver expects; the receiver compares.
func decode(m *transport.Message) (header, []byte, error) {
	var h header
	b := m.Meta.Body
	if len(b) != headerLen {
		return h, nil, fmt.Errorf("%w: header of %d bytes, want %d", errMalformed, len(b), headerLen)
	}
	if b[0] != wireVersion {
		return h, nil, fmt.Errorf("%w: version %d, want %d", errMalformed, b[0], wireVersion)
	}
	h.kind, h.elem, h.op = kind(b[1]), elemType(b[2]), Op(b[3])
	if h.kind < kindAllReduce || h.kind > kindMax {
		return h, nil, fmt.Errorf("%w: unknown collective %d", errMalformed, b[1])
	}
	if h.elem > elemMax {
		return h, nil, fmt.Errorf("%w: unknown element type %d", errMalformed, b[2])
	}
	if !h.op.valid() {
		return h, nil, fmt.Errorf("%w: unknown op %d", errMalformed, b[3])
	}
	h.seq = binary.LittleEndian.Uint64(b[4:])
	h.step = binary.LittleEndian.Uint32(b[12:])
	h.chunk = binary.LittleEndian.Uint32(b[16:])
	h.count = binary.LittleEndian.Uint64(b[20:])
	if h.seq == 0 {
		return h, nil, fmt.Errorf("%w: sequence number 0", errMalformed)
	}
	if h.count > maxCount {
		return h, nil, fmt.Errorf("%w: %d elements exceed the limit of %d", errMalformed, h.count, uint64(maxCount))
	}
	if (h.elem == elemNone) != (h.kind == kindBarrier || h.kind == kindAbort) {
		return h, nil, fmt.Errorf("%w: %s with element type %s", errMalformed, h.kind, h.elem)
	}
	switch len(m.Data) {
	case 0:
		if len(m.Meta.DataTypes) != 0 {
			return h, nil, fmt.Errorf("%w: %d data types without data", errMalformed, len(m.Meta.DataTypes))
		}
		return h, nil, nil
	case 1:
	default:
		return h, nil, fmt.Errorf("%w: %d data frames, want at most 1", errMalformed, len(m.Data))
	}
	if h.kind == kindAbort {
		if len(m.Meta.DataTypes) != 1 || m.Meta.DataTypes[0] != transport.TypeChar || len(m.Data[0]) > maxReason {
			return h, nil, fmt.Errorf("%w: abort reason of %d bytes, types %v", errMalformed, len(m.Data[0]), m.Meta.DataTypes)
		}
		return h, m.Data[0], nil
	}
	if h.elem == elemNone {
		return h, nil, fmt.Errorf("%w: data in a %s", errMalformed, h.kind)
	}
	if len(m.Meta.DataTypes) != 1 || m.Meta.DataTypes[0] != h.elem.dataType() {
		return h, nil, fmt.Errorf("%w: data types %v for elements of %s", errMalformed, m.Meta.DataTypes, h.elem)
	}
	d := m.Data[0]
	if len(d)%h.elem.size() != 0 {
		return h, nil, fmt.Errorf("%w: %d data bytes, not a multiple of %d", errMalformed, len(d), h.elem.size())
	}
	if uint64(len(d)/h.elem.size()) > h.count {
		return h, nil, fmt.Errorf("%w: %d elements in a %s of %d", errMalformed, len(d)/h.elem.size(), h.kind, h.count)
	}
	return h, d, nil
}
