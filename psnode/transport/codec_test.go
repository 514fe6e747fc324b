package transport_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// dataMeta is the meta of a typical KV push: keys and values frames.
func dataMeta() transport.Meta {
	return transport.Meta{
		Sender:    transport.WorkerID(0),
		Recver:    transport.ServerID(0),
		Timestamp: 3,
		Request:   true,
		Push:      true,
		DataTypes: []transport.DataType{transport.TypeUint64, transport.TypeFloat32},
	}
}

// controlMeta is the meta of the scheduler's node table broadcast.
func controlMeta() transport.Meta {
	return transport.Meta{
		Sender:    transport.SchedulerID,
		Recver:    transport.WorkerGroup,
		Request:   true,
		Timestamp: 1,
		MsgSig:    0xfeedface_cafebabe,
		Control: transport.Control{
			Cmd: transport.CmdAddNode,
			Nodes: []transport.Node{
				{Role: transport.RoleScheduler, ID: transport.SchedulerID, Host: "10.0.0.1", Port: 9091, Rank: 0, Incarnation: 77},
				{Role: transport.RoleServer, ID: transport.ServerID(0), Host: "10.0.0.2", Port: 40001, Rank: 0, Incarnation: -5},
				{Role: transport.RoleWorker, ID: transport.WorkerID(1), Host: "node-7.example", Port: 40002, Rank: 1, IsRecovery: true, Incarnation: math.MaxInt64},
				{Role: transport.RoleWorker, ID: transport.EmptyID, Host: "10.0.0.4", Port: 40003, Rank: -1},
			},
			Auth:  []byte{0xde, 0xad, 0xbe, 0xef},
			Nonce: 123456789,
		},
	}
}

func TestMetaRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		meta transport.Meta
	}{
		{name: "zero", meta: transport.Meta{}},
		{name: "data", meta: dataMeta()},
		{name: "control nodes", meta: controlMeta()},
		{name: "every field", meta: transport.Meta{
			Sender: 9, Recver: 8, AppID: 3, CustomerID: 4, Timestamp: 5,
			Request: true, Push: true, Pull: true, SimpleApp: true,
			Head: 6, Body: []byte("body\x00bytes"), Priority: 7, Status: 8, Filters: 9,
			MsgSig:    math.MaxUint64,
			Acks:      []int32{1, 2, 40000},
			DataTypes: []transport.DataType{transport.TypeChar, transport.TypeInt8, transport.TypeInt16, transport.TypeInt32, transport.TypeInt64, transport.TypeUint8, transport.TypeUint16, transport.TypeUint32, transport.TypeUint64, transport.TypeFloat32, transport.TypeFloat64, transport.TypeOther},
			Control: transport.Control{
				Cmd: transport.CmdBarrier, BarrierGroup: transport.AllGroups, MsgSig: 1 << 63,
				Auth: []byte{1}, Nonce: math.MinInt64, Reason: "refused: \u00e9",
				Nodes: []transport.Node{{Role: transport.RoleServer, ID: 8, Host: "h", Port: 1, Rank: 0, IsRecovery: true, Incarnation: 1}},
			},
		}},
		{name: "negative ids", meta: transport.Meta{
			Sender: -1, Recver: math.MinInt32, AppID: -2, CustomerID: -3, Timestamp: math.MinInt32,
			Head: -4, Priority: -5, Status: -6, Filters: -10,
			DataTypes: []transport.DataType{-1, math.MaxInt32},
			Control:   transport.Control{Cmd: -7, BarrierGroup: -8, Nonce: -9},
		}},
		{name: "empty ids", meta: transport.Meta{
			Sender: transport.EmptyID, Recver: transport.EmptyID,
			Control: transport.Control{Cmd: transport.CmdAddNode, Nodes: []transport.Node{{ID: transport.EmptyID, Rank: -1}}},
		}},
		{name: "ranks", meta: transport.Meta{Control: transport.Control{Nodes: []transport.Node{
			{Rank: -1}, {Rank: 0}, {Rank: 1}, {Rank: math.MaxInt32}, {Rank: math.MinInt32}, {Rank: -2},
		}}}},
		{name: "control without command", meta: transport.Meta{Control: transport.Control{Reason: "r"}}},
		{name: "ack", meta: transport.Meta{Sender: 8, Recver: 9, Control: transport.Control{Cmd: transport.CmdAck, MsgSig: 42}}},
		{name: "max data types", meta: transport.Meta{DataTypes: make([]transport.DataType, transport.MaxDataFrames)}},
		{name: "acks", meta: transport.Meta{Sender: 8, Recver: 9, Push: true, Timestamp: 3, Acks: []int32{-1, 0, math.MaxInt32, math.MinInt32}}},
		{name: "max acks", meta: transport.Meta{Acks: make([]int32, transport.MaxAcks)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := roundTrip(t, &tt.meta)
			if !reflect.DeepEqual(got, tt.meta) {
				t.Fatalf("round trip changed the meta:\n got %+v\nwant %+v", got, tt.meta)
			}
		})
	}
}

func roundTrip(t *testing.T, m *transport.Meta) transport.Meta {
	t.Helper()
	b, err := transport.AppendMeta(nil, m)
	if err != nil {
		t.Fatalf("AppendMeta: %v", err)
	}
	got, err := transport.DecodeMeta(b)
	if err != nil {
		t.Fatalf("DecodeMeta(%x): %v", b, err)
	}
	return got
}

// TestMetaEmptySlices pins down that an empty Body, Auth, DataTypes or
// Nodes is not distinguished from a nil one: both decode as nil.
func TestMetaEmptySlices(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		meta transport.Meta
	}{
		{name: "nil", meta: transport.Meta{}},
		{name: "empty", meta: transport.Meta{
			Body: []byte{}, DataTypes: []transport.DataType{},
			Control: transport.Control{Auth: []byte{}, Nodes: []transport.Node{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := roundTrip(t, &tt.meta)
			if got.Body != nil || got.DataTypes != nil || got.Control.Auth != nil || got.Control.Nodes != nil {
				t.Fatalf("empty slices decoded as non-nil: %+v", got)
			}
			b, err := transport.AppendMeta(nil, &tt.meta)
			if err != nil {
				t.Fatal(err)
			}
			if want := []byte{0}; !bytes.Equal(b, want) {
				t.Fatalf("encoding = %x, want %x (a bare STOP)", b, want)
			}
		})
	}
}

// TestMetaGolden fixes the wire encoding of a data message's meta, so that
// a change to the schema or the encoder cannot alter it silently.
func TestMetaGolden(t *testing.T) {
	t.Parallel()
	m := dataMeta()
	m.MsgSig = 300
	// 41       field 4 (request), BOOLEAN_TRUE
	// 11       field 5 (push), BOOLEAN_TRUE
	// 35 06    field 8 (timestamp), i32 zigzag(3)
	// 19 25    field 9 (data_type), list of 2 i32
	// 10 12    zigzag(8) uint64, zigzag(9) float32
	// 55 12    field 14 (sender), i32 zigzag(9)
	// 15 10    field 15 (recver), i32 zigzag(8)
	// 16 d804  field 16 (msg_sig), i64 zigzag(300)
	// 00       STOP
	const want = "41" + "11" + "3506" + "1925" + "1012" + "5512" + "1510" + "16d804" + "00"
	got, err := transport.AppendMeta(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(got) != want {
		t.Fatalf("encoding = %x, want %s", got, want)
	}
	dec, err := transport.DecodeMeta(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, m) {
		t.Fatalf("decoded %+v, want %+v", dec, m)
	}
}

func TestAppendMetaAppends(t *testing.T) {
	t.Parallel()
	m := dataMeta()
	prefix := []byte("prefix")
	b, err := transport.AppendMeta(prefix, &m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("AppendMeta lost the prefix: %q", b)
	}
	got, err := transport.DecodeMeta(b[len(prefix):])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
}

func TestAppendMetaLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		meta transport.Meta
	}{
		{name: "data types", meta: transport.Meta{DataTypes: make([]transport.DataType, transport.MaxDataFrames+1)}},
		{name: "nodes", meta: transport.Meta{Control: transport.Control{Nodes: make([]transport.Node, transport.MaxNodes+1)}}},
		{name: "acks", meta: transport.Meta{Acks: make([]int32, transport.MaxAcks+1)}},
		{name: "meta size", meta: transport.Meta{Body: make([]byte, transport.MaxMetaSize)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := transport.AppendMeta(nil, &tt.meta); !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("AppendMeta of a meta over a limit = %v, want an error wrapping ErrMalformed", err)
			}
		})
	}
}

func TestDecodeMetaDoesNotAlias(t *testing.T) {
	t.Parallel()
	m := controlMeta()
	m.Body = []byte("body")
	b, err := transport.AppendMeta(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := transport.DecodeMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xff
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded meta changed with its input buffer: %+v", got)
	}
}

func TestDecodeMetaMalformed(t *testing.T) {
	t.Parallel()
	valid, err := transport.AppendMeta(nil, &transport.Meta{Sender: 9, Recver: 8, Body: []byte("0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input []byte
	}{
		{name: "nil", input: nil},
		{name: "empty", input: []byte{}},
		{name: "truncated", input: valid[:len(valid)-1]},
		{name: "truncated body", input: valid[:len(valid)-4]},
		{name: "trailing bytes", input: append(append([]byte{}, valid...), 0)},
		{name: "no stop", input: []byte{0x55, 0x12}},
		// Field 9 (data_type) as a list claiming 2^31-1 i32 elements.
		{name: "huge list", input: []byte{0x99, 0xf5, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00}},
		// Field 3 (control), field 2 (nodes): a list claiming 1,000,000 structs.
		{name: "huge node list", input: []byte{0x3c, 0x29, 0xfc, 0xc0, 0x84, 0x3d, 0x00, 0x00, 0x00}},
		// Field 2 (body) claiming a 2^31-1 byte binary.
		{name: "huge binary", input: []byte{0x28, 0xff, 0xff, 0xff, 0xff, 0x07}},
		{name: "negative length", input: []byte{0x28, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{name: "too many data types", input: func() []byte {
			b := []byte{0x99, 0xf5, byte(transport.MaxDataFrames + 1)}
			b = append(b, make([]byte, transport.MaxDataFrames+1)...)
			return append(b, 0)
		}()},
		// Field 31 (acks), in the long form, one element over MaxAcks.
		{name: "too many acks", input: func() []byte {
			b := binary.AppendUvarint([]byte{0x09, 0x3e, 0xf5}, transport.MaxAcks+1)
			b = append(b, make([]byte, transport.MaxAcks+1)...)
			return append(b, 0)
		}()},
		{name: "node list over MaxNodes", input: nodeList(transport.MaxNodes + 1)},
		{name: "list of STOP", input: []byte{0x99, 0x30, 0x00}},
		{name: "map of STOP", input: []byte{0x0b, 0x28, 0x03, 0x00, 0x00}},
		{name: "nested lists of STOP", input: stopLists(100_000, 300_000)},
		{name: "bad type", input: []byte{0x1d, 0x00}},
		{name: "deep nesting", input: bytes.Repeat([]byte{0x3c}, 200)},
		{name: "oversized", input: make([]byte, transport.MaxMetaSize+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := transport.DecodeMeta(tt.input)
			if err == nil {
				t.Fatalf("DecodeMeta(%x) = %+v, want an error", tt.input[:min(len(tt.input), 32)], m)
			}
			if !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

// TestDecodeMetaUnknownFields checks forward compatibility: fields this
// version does not know (ps-lite's data_size, 11; a future list of
// structs, 20) and known fields of an unexpected type are skipped.
func TestDecodeMetaUnknownFields(t *testing.T) {
	t.Parallel()
	// b5 02       field 11, i32 1
	// 99 1c       field 20, list of 1 struct
	// 15 02 00      field 1 i32 1, STOP
	// 1b 01 55    field 21, map of 1 i32 → i32
	// 02 04         1 → 2
	// 18 01 78    field 22, binary "x"
	// 00          STOP
	b := []byte{0xb5, 0x02, 0x99, 0x1c, 0x15, 0x02, 0x00, 0x1b, 0x01, 0x55, 0x02, 0x04, 0x18, 0x01, 0x78, 0x00}
	m, err := transport.DecodeMeta(b)
	if err != nil {
		t.Fatalf("DecodeMeta: %v", err)
	}
	if !reflect.DeepEqual(m, transport.Meta{}) {
		t.Fatalf("decoded %+v, want the zero meta", m)
	}
	// Field 14 (sender) sent as a string is skipped, not misread.
	m, err = transport.DecodeMeta([]byte{0xe8, 0x01, 0x78, 0x15, 0x10, 0x00})
	if err != nil {
		t.Fatalf("DecodeMeta: %v", err)
	}
	if want := (transport.Meta{Recver: 8}); !reflect.DeepEqual(m, want) {
		t.Fatalf("decoded %+v, want %+v", m, want)
	}
}

// stopLists returns a meta frame with an unknown field 20 holding a list
// of n lists that each claim m elements of type STOP.
func stopLists(n, m int) []byte {
	b := binary.AppendUvarint([]byte{0x09, 0x28, 0xf9}, uint64(n)) // field 20, list of lists
	for range n {
		b = binary.AppendUvarint(append(b, 0xf0), uint64(m)) // list of m STOP
	}
	return append(b, make([]byte, m)...)
}

// nodeList returns a meta frame whose control holds n empty nodes.
func nodeList(n int) []byte {
	b := []byte{0x3c, 0x29, 0xfc} // field 3 control, field 2 nodes, list of structs
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, make([]byte, n)...) // each node a bare STOP
	return append(b, 0, 0)
}

func TestDecodeMetaMaxNodes(t *testing.T) {
	t.Parallel()
	m, err := transport.DecodeMeta(nodeList(transport.MaxNodes))
	if err != nil {
		t.Fatalf("DecodeMeta of MaxNodes nodes: %v", err)
	}
	if len(m.Control.Nodes) != transport.MaxNodes || m.Control.Nodes[0].Rank != -1 {
		t.Fatalf("decoded %d nodes, want %d", len(m.Control.Nodes), transport.MaxNodes)
	}
}

// TestDecodeMetaAllocationBound feeds frames of 1 MiB built to make the
// decoder allocate (lists and binaries claiming the whole frame) and
// checks what it allocates.
func TestDecodeMetaAllocationBound(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		name  string
		frame []byte
		limit uint64
	}{
		// field 9 data_type: a list of 2^20 zero i32, refused at its header.
		{name: "data types", frame: append(binary.AppendUvarint([]byte{0x99, 0xf5}, size), make([]byte, size)...), limit: 64 << 10},
		// field 9 (long form) repeated: lists of MaxDataFrames zero i32,
		// each read and then replaced by the next.
		{name: "repeated lists", frame: bytes.Repeat(append([]byte{0x09, 0x12, 0xf5, transport.MaxDataFrames}, make([]byte, transport.MaxDataFrames)...), size/68), limit: 5 * size},
		// field 2 body: one binary of the whole frame.
		{name: "body", frame: append(binary.AppendUvarint([]byte{0x28}, size), make([]byte, size)...), limit: 3 * size},
		// A node list claiming 2^20 nodes, refused at its header.
		{name: "nodes", frame: nodeList(size), limit: 64 << 10},
		{name: "max nodes", frame: nodeList(transport.MaxNodes), limit: 16 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _ = transport.DecodeMeta(tt.frame)
			runtime.ReadMemStats(&after)
			got := after.TotalAlloc - before.TotalAlloc
			if got > tt.limit {
				t.Fatalf("decoding a %d-byte frame allocated %d bytes, want at most %d", len(tt.frame), got, tt.limit)
			}
			t.Logf("decoding a %d-byte frame allocated %d bytes", len(tt.frame), got)
		})
	}
}

func TestCheckData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		types   []transport.DataType
		data    [][]byte
		wantErr string
	}{
		{name: "no frames"},
		{name: "untyped frames", data: [][]byte{{1, 2, 3}, nil}},
		{name: "typed", types: []transport.DataType{transport.TypeUint64, transport.TypeFloat32, transport.TypeChar},
			data: [][]byte{make([]byte, 16), make([]byte, 8), make([]byte, 3)}},
		{name: "other type any length", types: []transport.DataType{transport.TypeOther, 99}, data: [][]byte{{1, 2, 3}, {1}}},
		{name: "count mismatch", types: []transport.DataType{transport.TypeUint64}, data: [][]byte{nil, nil}, wantErr: "data types"},
		{name: "ragged frame", types: []transport.DataType{transport.TypeUint64}, data: [][]byte{make([]byte, 12)}, wantErr: "multiple"},
		{name: "too many frames", data: make([][]byte, transport.MaxDataFrames+1), wantErr: "exceed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := transport.CheckData(&transport.Message{Meta: transport.Meta{DataTypes: tt.types}, Data: tt.data})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckData: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("CheckData = %v, want an error containing %q", err, tt.wantErr)
			case err != nil && !errors.Is(err, transport.ErrMalformed):
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func BenchmarkMeta(b *testing.B) {
	metas := []struct {
		name string
		meta transport.Meta
	}{
		{name: "data", meta: dataMeta()},
		{name: "control", meta: controlMeta()},
	}
	for _, mm := range metas {
		enc, err := transport.AppendMeta(nil, &mm.meta)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("op=encode/meta="+mm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				var err error
				buf, err = transport.AppendMeta(buf[:0], &mm.meta)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("op=decode/meta="+mm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := transport.DecodeMeta(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
