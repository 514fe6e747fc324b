package collective

import (
	"context"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/psnode/transport"
)

func validMessage() *transport.Message {
	h := header{kind: kindAllReduce, elem: elemF32, op: Max, seq: 3, step: 2, chunk: 1, count: 10}
	return &transport.Message{
		Meta: transport.Meta{Sender: 9, Body: h.appendTo(nil), DataTypes: []transport.DataType{transport.TypeFloat32}},
		Data: [][]byte{make([]byte, 12)},
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	m := validMessage()
	h, d, err := decode(m)
	if err != nil {
		t.Fatal(err)
	}
	want := header{kind: kindAllReduce, elem: elemF32, op: Max, seq: 3, step: 2, chunk: 1, count: 10}
	if h != want || len(d) != 12 {
		t.Fatalf("decoded %+v with %d bytes, want %+v with 12", h, len(d), want)
	}
	b := header{kind: kindBarrier, seq: 1}
	if _, _, err := decode(&transport.Message{Meta: transport.Meta{Body: b.appendTo(nil)}}); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	a := header{kind: kindAbort, seq: 1}
	am := &transport.Message{
		Meta: transport.Meta{Body: a.appendTo(nil), DataTypes: []transport.DataType{transport.TypeChar}},
		Data: [][]byte{[]byte("why")},
	}
	if _, d, err := decode(am); err != nil || string(d) != "why" {
		t.Fatalf("abort: %q, %v", d, err)
	}
	am.Data[0] = make([]byte, maxReason+1)
	if _, _, err := decode(am); err == nil {
		t.Fatal("abort with a reason over the limit accepted")
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(m *transport.Message)
		want string
	}{
		{"short header", func(m *transport.Message) { m.Meta.Body = m.Meta.Body[:27] }, "header of 27 bytes"},
		{"long header", func(m *transport.Message) { m.Meta.Body = append(m.Meta.Body, 0) }, "header of 29 bytes"},
		{"version", func(m *transport.Message) { m.Meta.Body[0] = 2 }, "version 2"},
		{"unknown collective", func(m *transport.Message) { m.Meta.Body[1] = 99 }, "unknown collective 99"},
		{"zero collective", func(m *transport.Message) { m.Meta.Body[1] = 0 }, "unknown collective 0"},
		{"unknown type", func(m *transport.Message) { m.Meta.Body[2] = 7 }, "unknown element type 7"},
		{"unknown op", func(m *transport.Message) { m.Meta.Body[3] = 4 }, "unknown op 4"},
		{"seq 0", func(m *transport.Message) { clear(m.Meta.Body[4:12]) }, "sequence number 0"},
		{"huge count", func(m *transport.Message) { m.Meta.Body[27] = 1 }, "exceed the limit"},
		{"two frames", func(m *transport.Message) {
			m.Data = append(m.Data, nil)
			m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeFloat32)
		}, "2 data frames"},
		{"wrong data type", func(m *transport.Message) { m.Meta.DataTypes[0] = transport.TypeFloat64 }, "data types"},
		{"ragged data", func(m *transport.Message) { m.Data[0] = m.Data[0][:11] }, "not a multiple of 4"},
		{"more than count", func(m *transport.Message) { m.Data[0] = make([]byte, 44) }, "11 elements in a AllReduce of 10"},
		{"types without data", func(m *transport.Message) { m.Data = nil }, "data types without data"},
		{"barrier with type", func(m *transport.Message) { m.Meta.Body[1] = byte(kindBarrier) }, "Barrier with element type float32"},
		{"allreduce without type", func(m *transport.Message) { m.Meta.Body[2] = 0 }, "AllReduce with element type none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validMessage()
			tc.mod(m)
			_, _, err := decode(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// testGroup is a group of two members without a node: enough for the
// receive path.
func testGroup() *Group {
	g := &Group{
		rankOf:  map[int32]int{9: 0, 11: 1},
		members: []transport.Node{{Role: transport.RoleWorker, ID: 9, Rank: 0, Host: "h0", Port: 1}, {Role: transport.RoleWorker, ID: 11, Rank: 1, Host: "h1", Port: 2}},
		box:     make(map[boxKey]boxed),
		notify:  make(chan struct{}, 1),
	}
	g.failCtx, g.failWith = context.WithCancelCause(context.Background())
	return g
}

// FuzzDecode feeds arbitrary headers and data to the decoder and to a
// group's receive path: nothing may panic, and whatever is accepted
// obeys the format's bounds.
func FuzzDecode(f *testing.F) {
	m := validMessage()
	f.Add(m.Meta.Body, m.Data[0], uint8(1), int32(transport.TypeFloat32))
	b := header{kind: kindBarrier, seq: 1}
	f.Add(b.appendTo(nil), []byte(nil), uint8(0), int32(0))
	f.Add([]byte{1, 6, 0, 0}, []byte{1, 2, 3}, uint8(1), int32(transport.TypeInt64))
	f.Fuzz(func(t *testing.T, body, data []byte, frames uint8, dt int32) {
		m := &transport.Message{Meta: transport.Meta{Sender: 11, Body: body}}
		for range frames % 3 {
			m.Data = append(m.Data, data)
			m.Meta.DataTypes = append(m.Meta.DataTypes, transport.DataType(dt))
		}
		h, d, err := decode(m)
		if err == nil {
			if h.kind < kindAllReduce || h.kind > kindMax || h.elem > elemMax || !h.op.valid() || h.count > maxCount || h.seq == 0 {
				t.Fatalf("accepted header %+v", h)
			}
			if s := h.elem.size(); s > 0 && (len(d)%s != 0 || uint64(len(d)/s) > h.count) {
				t.Fatalf("accepted %d data bytes for %+v", len(d), h)
			}
		}
		g := testGroup()
		g.handle(m)
		if err != nil && g.failed() == nil {
			t.Fatalf("a malformed message (%v) did not fail the group", err)
		}
	})
}

func TestShardCoversEveryElement(t *testing.T) {
	for size := 1; size <= 5; size++ {
		for n := 0; n <= 23; n++ {
			next := 0
			for r := range size {
				lo, hi := shard(n, size, r)
				if lo != next || hi < lo || hi-lo > n/size+1 || hi-lo < n/size {
					t.Fatalf("shard(%d, %d, %d) = [%d, %d), previous ended at %d", n, size, r, lo, hi, next)
				}
				if (hi-lo == n/size+1) != (r < n%size) {
					t.Fatalf("shard(%d, %d, %d) = [%d, %d): the first n%%size shards are the longer ones", n, size, r, lo, hi)
				}
				next = hi
			}
			if next != n {
				t.Fatalf("shards of %d over %d end at %d", n, size, next)
			}
		}
	}
}

func TestElemsOfMisalignedBytes(t *testing.T) {
	src := []float64{1.5, -2.25, 3}
	b := append([]byte{0}, wireBytes(src)...)[1:] // misaligned for float64
	got := elems[float64](b)
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("element %d: %v, want %v", i, got[i], src[i])
		}
	}
	type myInt int64
	if elemOf[myInt]() != elemI64 || elemOf[float32]() != elemF32 || elemOf[float64]() != elemF64 {
		t.Fatal("elemOf names the wrong wire types")
	}
}
