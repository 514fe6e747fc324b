package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/spindle-ps/spindle/psnode/transport/internal/wire"
)

// Limits on what a decoder accepts from a peer. A frame over a limit is an
// error, never an allocation. The encoder refuses what the decoder would
// refuse.
const (
	// MaxMetaSize bounds the encoded meta frame.
	MaxMetaSize = 16 << 20
	// MaxDataFrames bounds the data frames of one message.
	MaxDataFrames = 64
	// MaxNodes bounds the node list of a control message. It is ZeroMQ's
	// ZMQ_MAX_SOCKETS as ps-lite sets it: no node can have more peers.
	MaxNodes = 1 << 16
	// MaxAcks bounds Meta.Acks.
	MaxAcks = 1024
)

// ErrMalformed is wrapped by every decoding error, by CheckData's errors
// and by AppendMeta's refusals of a meta over a limit.
var ErrMalformed = errors.New("transport: malformed message")

// The meta frame is a Thrift struct (psnode/transport/internal/wire
// meta.thrift) in the compact protocol:
//
//	+--------+---------+-----+----------+--------------+-----+------+
//	| fields | head 1  | ... | control 3| data_type 9  | ... | STOP |
//	+--------+---------+-----+----------+--------------+-----+------+
//	  each field: (delta<<4 | type) byte, then the value (zigzag varints,
//	  varint-length binaries, list header (size<<4 | elemtype) + elements)
//
// Optional fields at their zero value are not written, so a data message's
// meta is a few bytes.

// memCtx is handed to the Thrift encoder and decoder, which take a context
// for I/O; they run here over in-memory buffers and never block.
var memCtx = context.Background()

// A pooled encoder lets go of its node arrays once they have grown past
// this many nodes, so that one large node table does not stay resident.
const poolMaxNodes = 1024

var encPool = sync.Pool{New: func() any {
	e := &encoder{}
	e.proto = thrift.NewTCompactProtocolConf(&e.tr, &thrift.TConfiguration{})
	return e
}}

// encoder holds everything one AppendMeta call needs, so that encoding a
// meta allocates nothing once the encoder is warm: the optional fields of
// the generated structs point into v, cv and nvals.
type encoder struct {
	tr    sliceTransport
	proto *thrift.TCompactProtocol
	w     wire.Meta
	c     wire.Control
	v     struct {
		head, appID, timestamp, customerID, priority, sender, recver, status int32
		filters                                                              int32
		request, push, pull, simpleApp                                       bool
		msgSig                                                               int64
	}
	cv struct {
		cmd, barrierGroup int32
		msgSig, nonce     int64
		reason            string
	}
	types []int32
	nodes []wire.Node
	nptrs []*wire.Node
	nvals []nodeVals
}

type nodeVals struct {
	role, id, port, rank int32
	host                 string
	isRecovery           bool
	incarnation          int64
}

// AppendMeta appends the encoding of m to dst and returns the extended
// slice. It refuses a meta that DecodeMeta would reject for exceeding a
// limit (MaxMetaSize, MaxDataFrames data types, MaxNodes nodes); on error
// it returns dst unchanged. AppendMeta does not retain m or dst.
func AppendMeta(dst []byte, m *Meta) ([]byte, error) {
	if n := len(m.DataTypes); n > MaxDataFrames {
		return dst, fmt.Errorf("transport: encode meta: %w: %d data types exceed the limit of %d", ErrMalformed, n, MaxDataFrames)
	}
	if n := len(m.Control.Nodes); n > MaxNodes {
		return dst, fmt.Errorf("transport: encode meta: %w: %d nodes exceed the limit of %d", ErrMalformed, n, MaxNodes)
	}
	if n := len(m.Acks); n > MaxAcks {
		return dst, fmt.Errorf("transport: encode meta: %w: %d acks exceed the limit of %d", ErrMalformed, n, MaxAcks)
	}
	e := encPool.Get().(*encoder)
	e.fill(m)
	e.tr.wr = dst
	err := e.w.Write(memCtx, e.proto)
	out := e.tr.wr
	e.release()
	if err != nil {
		// Unreachable with an in-memory transport; the encoder's state is
		// unknown, so it is not pooled again.
		return dst, fmt.Errorf("transport: encode meta: %w", err)
	}
	encPool.Put(e)
	if n := len(out) - len(dst); n > MaxMetaSize {
		return dst, fmt.Errorf("transport: encode meta: %w: %d bytes exceed the %d-byte limit", ErrMalformed, n, MaxMetaSize)
	}
	return out, nil
}

// release drops the encoder's references to the caller's meta and buffer.
func (e *encoder) release() {
	e.tr.wr = nil
	e.w = wire.Meta{}
	e.c = wire.Control{}
	e.cv.reason = ""
	clear(e.nvals)
	if cap(e.nodes) > poolMaxNodes {
		e.nodes, e.nptrs, e.nvals = nil, nil, nil
	}
}

// set stores v in *p and returns p, or nil when v is the zero value, which
// is never written (all fields are optional).
func set[T comparable](p *T, v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	*p = v
	return p
}

func (e *encoder) fill(m *Meta) {
	v := &e.v
	e.w = wire.Meta{
		Head:       set(&v.head, m.Head),
		Request:    set(&v.request, m.Request),
		Push:       set(&v.push, m.Push),
		Pull:       set(&v.pull, m.Pull),
		SimpleApp:  set(&v.simpleApp, m.SimpleApp),
		AppID:      set(&v.appID, m.AppID),
		Timestamp:  set(&v.timestamp, m.Timestamp),
		CustomerID: set(&v.customerID, m.CustomerID),
		Priority:   set(&v.priority, m.Priority),
		Sender:     set(&v.sender, m.Sender),
		Recver:     set(&v.recver, m.Recver),
		MsgSig:     set(&v.msgSig, int64(m.MsgSig)),
		Status:     set(&v.status, m.Status),
		Filters:    set(&v.filters, m.Filters),
	}
	if len(m.Body) > 0 {
		e.w.Body = m.Body
	}
	if len(m.DataTypes) > 0 {
		e.types = e.types[:0]
		for _, t := range m.DataTypes {
			e.types = append(e.types, int32(t))
		}
		e.w.DataType = e.types
	}
	if len(m.Acks) > 0 {
		e.w.Acks = m.Acks
	}
	c := &m.Control
	if c.Cmd == CmdNone && len(c.Nodes) == 0 && c.BarrierGroup == 0 && c.MsgSig == 0 &&
		len(c.Auth) == 0 && c.Nonce == 0 && c.Reason == "" {
		return
	}
	cv := &e.cv
	e.c = wire.Control{
		Cmd:          set(&cv.cmd, int32(c.Cmd)),
		BarrierGroup: set(&cv.barrierGroup, c.BarrierGroup),
		MsgSig:       set(&cv.msgSig, int64(c.MsgSig)),
		Nonce:        set(&cv.nonce, c.Nonce),
		Reason:       set(&cv.reason, c.Reason),
	}
	if len(c.Auth) > 0 {
		e.c.Auth = c.Auth
	}
	if n := len(c.Nodes); n > 0 {
		// Size the backing arrays first: the pointers taken below must
		// not move.
		if cap(e.nodes) < n {
			e.nodes = make([]wire.Node, n)
			e.nptrs = make([]*wire.Node, n)
			e.nvals = make([]nodeVals, n)
		}
		e.nodes, e.nptrs, e.nvals = e.nodes[:n], e.nptrs[:n], e.nvals[:n]
		for i := range c.Nodes {
			n, nv := &c.Nodes[i], &e.nvals[i]
			e.nodes[i] = wire.Node{
				Role:        set(&nv.role, int32(n.Role)),
				ID:          set(&nv.id, n.ID),
				Host:        set(&nv.host, n.Host),
				Port:        set(&nv.port, n.Port),
				IsRecovery:  set(&nv.isRecovery, n.IsRecovery),
				Rank:        set(&nv.rank, n.Rank+1), // +1 so that the common "unknown" (-1) is absent
				Incarnation: set(&nv.incarnation, n.Incarnation),
			}
			e.nptrs[i] = &e.nodes[i]
		}
		e.c.Nodes = e.nptrs
	}
	e.w.Control = &e.c
}

var decPool = sync.Pool{New: func() any {
	d := &decoder{}
	d.proto.TCompactProtocol = thrift.NewTCompactProtocolConf(&d.tr, &d.cfg)
	d.proto.tr = &d.tr
	return d
}}

type decoder struct {
	tr    sliceTransport
	cfg   thrift.TConfiguration
	proto boundedProtocol
	w     wire.Meta
}

// DecodeMeta decodes a meta frame. It returns an error wrapping
// ErrMalformed for any input that is not a valid meta frame, and never
// panics. The returned Meta does not alias b.
//
// Allocation is bounded: every list, string and binary length is checked
// against the bytes that remain before anything is allocated for it (each
// list element takes at least one byte), the node list is refused beyond
// MaxNodes elements, the data type list beyond MaxDataFrames and the acks
// beyond MaxAcks. The worst case is a node table of MaxNodes empty nodes,
// about 9 MB from a 64 KiB frame; anything else allocates at most a few
// times the frame's size.
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) > MaxMetaSize {
		return Meta{}, fmt.Errorf("%w: meta frame of %d bytes exceeds the %d-byte limit", ErrMalformed, len(b), MaxMetaSize)
	}
	if len(b) == 0 {
		return Meta{}, fmt.Errorf("%w: empty meta frame", ErrMalformed)
	}
	d := decPool.Get().(*decoder)
	d.tr.rd, d.tr.off = b, 0
	d.cfg.MaxMessageSize = int32(len(b))
	d.w = wire.Meta{}
	m, err := d.decode()
	d.tr.rd = nil
	d.w = wire.Meta{}
	if err != nil {
		// The protocol may have been left mid-struct; do not reuse it.
		return Meta{}, err
	}
	decPool.Put(d)
	return m, nil
}

func (d *decoder) decode() (Meta, error) {
	w := &d.w
	if err := w.Read(memCtx, &d.proto); err != nil {
		return Meta{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if n := len(d.tr.rd) - d.tr.off; n != 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes after meta", ErrMalformed, n)
	}
	if len(w.DataType) > MaxDataFrames {
		return Meta{}, fmt.Errorf("%w: %d data types exceed the limit of %d", ErrMalformed, len(w.DataType), MaxDataFrames)
	}
	if len(w.Acks) > MaxAcks {
		return Meta{}, fmt.Errorf("%w: %d acks exceed the limit of %d", ErrMalformed, len(w.Acks), MaxAcks)
	}
	m := Meta{
		Head:       w.GetHead(),
		Request:    w.GetRequest(),
		Push:       w.GetPush(),
		Pull:       w.GetPull(),
		SimpleApp:  w.GetSimpleApp(),
		AppID:      w.GetAppID(),
		Timestamp:  w.GetTimestamp(),
		CustomerID: w.GetCustomerID(),
		Priority:   w.GetPriority(),
		Sender:     w.GetSender(),
		Recver:     w.GetRecver(),
		MsgSig:     uint64(w.GetMsgSig()),
		Status:     w.GetStatus(),
		Filters:    w.GetFilters(),
	}
	// Binaries are fresh allocations (boundedProtocol.ReadBinary), never
	// views of the input.
	if len(w.Body) > 0 {
		m.Body = w.Body
	}
	if len(w.DataType) > 0 {
		m.DataTypes = make([]DataType, len(w.DataType))
		for i, t := range w.DataType {
			m.DataTypes[i] = DataType(t)
		}
	}
	if len(w.Acks) > 0 {
		m.Acks = w.Acks // a fresh list, not a view of the input
	}
	c := w.Control
	if c == nil {
		return m, nil
	}
	m.Control = Control{
		Cmd:          Command(c.GetCmd()),
		BarrierGroup: c.GetBarrierGroup(),
		MsgSig:       uint64(c.GetMsgSig()),
		Nonce:        c.GetNonce(),
		Reason:       c.GetReason(),
	}
	if len(c.Auth) > 0 {
		m.Control.Auth = c.Auth
	}
	if len(c.Nodes) > MaxNodes {
		return Meta{}, fmt.Errorf("%w: %d nodes exceed the limit of %d", ErrMalformed, len(c.Nodes), MaxNodes)
	}
	if len(c.Nodes) > 0 {
		m.Control.Nodes = make([]Node, len(c.Nodes))
		for i, n := range c.Nodes {
			if n == nil {
				return Meta{}, fmt.Errorf("%w: nil node %d", ErrMalformed, i)
			}
			m.Control.Nodes[i] = Node{
				Role:        Role(n.GetRole()),
				ID:          n.GetID(),
				Host:        n.GetHost(),
				Port:        n.GetPort(),
				IsRecovery:  n.GetIsRecovery(),
				Rank:        n.GetRank() - 1,
				Incarnation: n.GetIncarnation(),
			}
		}
	}
	return m, nil
}

// boundedProtocol is the compact protocol with the checks the decoder
// relies on to bound its allocation by the input. Thrift 0.17 bounds a
// length only by MaxMessageSize (here len(b)), so a 64 KiB frame of
// one-byte elements could claim a million nodes and have a *Node
// allocated for each, and it reads binaries by growing a bytes.Buffer.
// Here every container must have no more elements than bytes remain
// (every element takes at least one byte), the schema's two lists have
// their own limits, binaries and strings are sized exactly, and Skip is
// routed through the same checks. The overrides read lengths straight
// from the slice transport, which the compact protocol does without
// buffering.
type boundedProtocol struct {
	*thrift.TCompactProtocol
	tr       *sliceTransport
	skipping int // depth of Skip calls in progress
}

// Skip skips a value of type t, with the container checks below applied
// to everything nested in it.
func (p *boundedProtocol) Skip(ctx context.Context, t thrift.TType) error {
	p.skipping++
	defer func() { p.skipping-- }()
	return thrift.SkipDefaultDepth(ctx, p, t)
}

// ReadListBegin checks the list header, and bounds the lists of the
// schema when they are read rather than skipped: node tables (the only
// list of structs) by MaxNodes, and lists of i32 (data_type and acks) by
// the larger of their limits, MaxAcks; decode then holds each to its own.
func (p *boundedProtocol) ReadListBegin(ctx context.Context) (thrift.TType, int, error) {
	elem, size, err := p.TCompactProtocol.ReadListBegin(ctx)
	if err != nil {
		return elem, size, err
	}
	if err := p.checkContainer(size, elem); err != nil {
		return elem, 0, err
	}
	if p.skipping > 0 {
		return elem, size, nil
	}
	switch {
	case elem == thrift.STRUCT && size > MaxNodes:
		return elem, 0, fmt.Errorf("list of %d structs exceeds the limit of %d", size, MaxNodes)
	case elem == thrift.I32 && size > max(MaxDataFrames, MaxAcks):
		return elem, 0, fmt.Errorf("list of %d i32 exceeds the limit of %d", size, max(MaxDataFrames, MaxAcks))
	}
	return elem, size, nil
}

// ReadSetBegin checks the set header (the schema has no sets).
func (p *boundedProtocol) ReadSetBegin(ctx context.Context) (thrift.TType, int, error) {
	elem, size, err := p.TCompactProtocol.ReadSetBegin(ctx)
	if err != nil {
		return elem, size, err
	}
	if err := p.checkContainer(size, elem); err != nil {
		return elem, 0, err
	}
	return elem, size, nil
}

// ReadMapBegin checks the map header (the schema has no maps).
func (p *boundedProtocol) ReadMapBegin(ctx context.Context) (thrift.TType, thrift.TType, int, error) {
	kt, vt, size, err := p.TCompactProtocol.ReadMapBegin(ctx)
	if err != nil {
		return kt, vt, size, err
	}
	if err := p.checkContainer(size, kt, vt); err != nil {
		return kt, vt, 0, err
	}
	return kt, vt, size, nil
}

// checkContainer refuses a container with more elements than bytes
// remain, or a non-empty one whose elements have no type (STOP, or an
// unknown type in a map header, which Thrift reads as STOP).
func (p *boundedProtocol) checkContainer(size int, types ...thrift.TType) error {
	if size == 0 {
		return nil
	}
	for _, t := range types {
		if t == thrift.STOP {
			return fmt.Errorf("container of %d elements of no type", size)
		}
	}
	if rem := p.tr.remaining(); size > rem {
		return fmt.Errorf("container of %d elements in %d remaining bytes", size, rem)
	}
	return nil
}

// ReadBinary returns an exactly sized copy (Thrift's own grows a
// bytes.Buffer in 512-byte steps).
func (p *boundedProtocol) ReadBinary(ctx context.Context) ([]byte, error) {
	b, err := p.tr.readLengthPrefixed()
	if err != nil || len(b) == 0 {
		return []byte{}, err
	}
	return bytes.Clone(b), nil
}

// ReadString is ReadBinary for strings.
func (p *boundedProtocol) ReadString(ctx context.Context) (string, error) {
	b, err := p.tr.readLengthPrefixed()
	return string(b), err
}

// sliceTransport is a Thrift transport that reads from rd and appends to
// wr, with no copying beyond that and no allocation. It is not safe for
// concurrent use.
type sliceTransport struct {
	rd  []byte
	off int
	wr  []byte
}

var errShortFrame = errors.New("unexpected end of frame")

func (t *sliceTransport) remaining() int { return len(t.rd) - t.off }

// readLengthPrefixed reads a compact-protocol length (an unsigned varint
// taken as int32, as Thrift does) and returns a view of that many bytes.
func (t *sliceTransport) readLengthPrefixed() ([]byte, error) {
	var v uint64
	for shift := 0; ; shift += 7 {
		if shift >= 64 {
			return nil, errors.New("varint too long")
		}
		c, err := t.ReadByte()
		if err != nil {
			return nil, err
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			break
		}
	}
	n := int32(v)
	if n < 0 {
		return nil, fmt.Errorf("negative length %d", n)
	}
	if int(n) > t.remaining() {
		return nil, fmt.Errorf("length %d exceeds the %d remaining bytes", n, t.remaining())
	}
	b := t.rd[t.off : t.off+int(n)]
	t.off += int(n)
	return b, nil
}

func (t *sliceTransport) Read(p []byte) (int, error) {
	if t.off >= len(t.rd) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, errShortFrame
	}
	n := copy(p, t.rd[t.off:])
	t.off += n
	return n, nil
}

func (t *sliceTransport) ReadByte() (byte, error) {
	if t.off >= len(t.rd) {
		return 0, errShortFrame
	}
	c := t.rd[t.off]
	t.off++
	return c, nil
}

func (t *sliceTransport) Write(p []byte) (int, error) {
	t.wr = append(t.wr, p...)
	return len(p), nil
}

func (t *sliceTransport) WriteByte(c byte) error {
	t.wr = append(t.wr, c)
	return nil
}

func (t *sliceTransport) WriteString(s string) (int, error) {
	t.wr = append(t.wr, s...)
	return len(s), nil
}

func (t *sliceTransport) RemainingBytes() uint64 { return uint64(t.remaining()) }

func (t *sliceTransport) Flush(context.Context) error { return nil }
func (t *sliceTransport) Open() error                 { return nil }
func (t *sliceTransport) IsOpen() bool                { return true }
func (t *sliceTransport) Close() error                { return nil }

var _ thrift.TRichTransport = (*sliceTransport)(nil)

// CheckData verifies that a message's data frames agree with its meta:
// at most MaxDataFrames frames, one data type per frame when types are
// given, and each frame's length a multiple of its element size.
func CheckData(m *Message) error {
	if len(m.Data) > MaxDataFrames {
		return fmt.Errorf("%w: %d data frames exceed the limit of %d", ErrMalformed, len(m.Data), MaxDataFrames)
	}
	if len(m.Meta.DataTypes) == 0 {
		return nil
	}
	if len(m.Meta.DataTypes) != len(m.Data) {
		return fmt.Errorf("%w: %d data frames but %d data types", ErrMalformed, len(m.Data), len(m.Meta.DataTypes))
	}
	for i, t := range m.Meta.DataTypes {
		if s := t.Size(); s > 1 && len(m.Data[i])%s != 0 {
			return fmt.Errorf("%w: data frame %d has %d bytes, not a multiple of %d", ErrMalformed, i, len(m.Data[i]), s)
		}
	}
	return nil
}
