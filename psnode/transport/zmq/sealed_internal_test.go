package zmq

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// sealedMessage seals data as Send would: the message with empty places,
// its envelope, and the sealed frames.
func sealedMessage(t *testing.T, ts int32, data ...[]byte) (*transport.Message, *envelope, []*cFrame) {
	t.Helper()
	return sealedMessageMax(t, ts, maxFrame, data...)
}

// sealedMessageMax is sealedMessage with frames of at most max bytes on
// the sealed route.
func sealedMessageMax(t *testing.T, ts int32, max int, data ...[]byte) (*transport.Message, *envelope, []*cFrame) {
	t.Helper()
	env, err := newEnvelope(data, max)
	if err != nil || env == nil {
		t.Fatalf("newEnvelope = %v, %v", env, err)
	}
	frames, err := env.seal(data)
	if err != nil {
		t.Fatal(err)
	}
	types := make([]transport.DataType, len(data))
	for i := range types {
		types[i] = transport.TypeUint8
	}
	m := &transport.Message{Meta: transport.Meta{Timestamp: ts, DataTypes: types}, Data: make([][]byte, len(data))}
	next := 0
	for i, d := range data {
		if next < len(env.frames) && env.frames[next].index == i {
			next++
			continue
		}
		m.Data[i] = d
	}
	return m, env, frames
}

func seq(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// TestSealOpen seals frames under, at and over a chunk (the last chunk
// of one shorter than a tag), in parallel and not, and opens them into
// new memory and in place; any change to a sealed frame, its length, or
// its order is refused.
func TestSealOpen(t *testing.T) {
	data := [][]byte{seq(10, 1), seq(3*sealChunk+5, 2), seq(minSealed, 3), seq(5*sealChunk, 4), seq(sealChunk, 5)}
	for _, inPlace := range []bool{false, true} {
		m, env, frames := sealedMessage(t, 1, data...)
		if len(env.frames) != 4 || len(m.Data[1]) != 0 {
			t.Fatalf("sealed %d frames, want 4", len(env.frames))
		}
		if bytes.Contains(frames[0].bytes(), data[1][:64]) {
			t.Fatal("a sealed frame holds its plaintext")
		}
		lent, err := env.open(m, frames, inPlace)
		if err != nil {
			t.Fatalf("in place %v: %v", inPlace, err)
		}
		for i := range data {
			if !bytes.Equal(m.Data[i], data[i]) {
				t.Fatalf("in place %v: frame %d opened changed", inPlace, i)
			}
		}
		if !inPlace {
			if lent != nil {
				t.Fatal("opened into new memory, yet frames returned to lend")
			}
			continue
		}
		if len(lent) != len(frames) {
			t.Fatalf("opened in place, %d frames returned to lend, want %d", len(lent), len(frames))
		}
		for i, f := range env.frames {
			if &m.Data[f.index][0] != &lent[i].bytes()[0] {
				t.Fatalf("frame %d opened in place is not the sealed frame's memory", f.index)
			}
		}
		closeFrames(lent)
	}
	for _, tc := range []struct {
		name   string
		tamper func(env *envelope, fs []*cFrame) []*cFrame
	}{
		{"a bit flipped", func(_ *envelope, fs []*cFrame) []*cFrame { fs[0].bytes()[sealChunk+100] ^= 1; return fs }},
		{"the last chunk's tag changed", func(env *envelope, fs []*cFrame) []*cFrame {
			fs[0].bytes()[env.frames[0].length] ^= 0x80
			return fs
		}},
		{"another chunk's tag changed", func(_ *envelope, fs []*cFrame) []*cFrame { b := fs[2].bytes(); b[len(b)-1] ^= 0x80; return fs }},
		{"frames swapped", func(_ *envelope, fs []*cFrame) []*cFrame { fs[0], fs[2] = fs[2], fs[0]; return fs }},
		{"a frame missing", func(_ *envelope, fs []*cFrame) []*cFrame { fs[3].close(); return fs[:3] }},
		{"another key", func(env *envelope, fs []*cFrame) []*cFrame { env.key[0] ^= 1; return fs }},
		{"a length changed", func(env *envelope, fs []*cFrame) []*cFrame { env.frames[1].length -= 4; return fs }},
	} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/in place %v", tc.name, inPlace), func(t *testing.T) {
				m, env, frames := sealedMessage(t, 1, data...)
				frames = tc.tamper(env, frames)
				lent, err := env.open(m, frames, inPlace)
				if !errors.Is(err, transport.ErrMalformed) || lent != nil {
					t.Fatalf("open = %d frames, %v; want none and an error wrapping ErrMalformed", len(lent), err)
				}
			})
		}
	}
}

// TestSealOpenPieced seals frames longer than the bound on a frame of
// the sealed route: they go in pieces of whole chunks, none over the
// bound, and open into new memory beside a frame opened in place; a piece
// changed, cut, missing or moved is refused.
func TestSealOpenPieced(t *testing.T) {
	const max = 3*sealChunk + 3*sealOverhead + 100 // three whole chunks a piece
	data := [][]byte{seq(10*sealChunk+77, 1), seq(minSealed, 2), seq(7*sealChunk, 3), seq(3*sealChunk, 4)}
	wantPieces := []int{4, 1, 3, 1}
	for _, inPlace := range []bool{false, true} {
		m, env, frames := sealedMessageMax(t, 1, max, data...)
		total := 0
		for i, f := range env.frames {
			if f.pieced != (wantPieces[i] > 1) {
				t.Fatalf("frame %d of %d bytes pieced %v", f.index, f.length, f.pieced)
			}
			total += wantPieces[i]
		}
		if len(frames) != total {
			t.Fatalf("%d frames on the sealed route, want %d", len(frames), total)
		}
		for _, f := range frames {
			if n := len(f.bytes()); n > max {
				t.Fatalf("a frame of %d bytes on the sealed route, over the bound of %d", n, max)
			}
		}
		got, err := decodeEnvelope(env.encode(nil))
		if err != nil {
			t.Fatal(err)
		}
		lent, err := got.open(m, frames, inPlace)
		if err != nil {
			t.Fatalf("in place %v: %v", inPlace, err)
		}
		for i := range data {
			if !bytes.Equal(m.Data[i], data[i]) {
				t.Fatalf("in place %v: frame %d opened changed", inPlace, i)
			}
		}
		switch {
		case !inPlace && lent != nil:
			t.Fatal("opened into new memory, yet frames returned to lend")
		case inPlace && len(lent) != 2:
			t.Fatalf("opened in place, %d frames returned to lend, want the 2 not pieced", len(lent))
		case inPlace && (&m.Data[1][0] != &lent[0].bytes()[0] || &m.Data[3][0] != &lent[1].bytes()[0]):
			t.Fatal("a frame not pieced did not open in place")
		}
		closeFrames(lent)
	}
	for _, tc := range []struct {
		name   string
		tamper func(fs []*cFrame) []*cFrame
	}{
		{"a bit flipped", func(fs []*cFrame) []*cFrame { fs[1].bytes()[5] ^= 1; return fs }},
		{"pieces swapped", func(fs []*cFrame) []*cFrame { fs[0], fs[1] = fs[1], fs[0]; return fs }},
		{"a piece missing", func(fs []*cFrame) []*cFrame { fs[2].close(); return append(fs[:2:2], fs[3:]...) }},
		{"a piece too many", func(fs []*cFrame) []*cFrame {
			extra, err := newCFrame(sealChunk + sealOverhead)
			if err != nil {
				t.Fatal(err)
			}
			return append(fs, extra)
		}},
		{"a piece cut", func(fs []*cFrame) []*cFrame {
			short, err := newCFrame(len(fs[0].bytes()) - 1)
			if err != nil {
				t.Fatal(err)
			}
			copy(short.bytes(), fs[0].bytes())
			fs[0].close()
			fs[0] = short
			return fs
		}},
	} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/in place %v", tc.name, inPlace), func(t *testing.T) {
				m, env, frames := sealedMessageMax(t, 1, max, data...)
				frames = tc.tamper(frames)
				lent, err := env.open(m, frames, inPlace)
				if !errors.Is(err, transport.ErrMalformed) || lent != nil {
					t.Fatalf("open = %d frames, %v; want none and an error wrapping ErrMalformed", len(lent), err)
				}
			})
		}
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	_, env, frames := sealedMessage(t, 1, seq(8, 1), seq(minSealed+4, 2), seq(minSealed, 3))
	closeFrames(frames)
	got, err := decodeEnvelope(env.encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.tag != env.tag || got.key != env.key || len(got.frames) != 2 || got.frames[0] != env.frames[0] || got.frames[1] != env.frames[1] {
		t.Fatalf("decoded %+v, want %+v", got, env)
	}
}

// FuzzDecodeEnvelope: no input makes decodeEnvelope panic; an error wraps
// ErrMalformed; what decodes encodes to the same bytes.
func FuzzDecodeEnvelope(f *testing.F) {
	e := envelope{frames: []sealedFrame{{index: 0, length: 1 << 20}, {index: 3, length: 5}, {index: 5, length: 40 << 20, pieced: true}}}
	f.Add(e.encode(nil))
	f.Add(ctlEnvelope)
	f.Add([]byte("\x00spindle:sealed:0123456789abcdef0123456789abcdef\x01\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, transport.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !bytes.Equal(e.encode(nil), b) {
			t.Fatal("decoded envelope encodes differently")
		}
	})
}

// inboundRecorder is an inbound whose deliveries and drops are recorded,
// with a clock the test moves.
type inboundRecorder struct {
	*inbound
	got     []int32
	dropped []error
	clock   time.Time
}

func newRecorder() *inboundRecorder {
	r := &inboundRecorder{clock: time.Unix(1000, 0)}
	r.inbound = newInbound(func(m *transport.Message) bool {
		r.got = append(r.got, m.Meta.Timestamp)
		return true
	}, func(_ []byte, _ *transport.Meta, err error) { r.dropped = append(r.dropped, err) })
	r.now = func() time.Time { return r.clock }
	return r
}

func plain(ts int32) *transport.Message {
	return &transport.Message{Meta: transport.Meta{Timestamp: ts}}
}

func (r *inboundRecorder) want(t *testing.T, ts ...int32) {
	t.Helper()
	if len(r.got) != len(ts) {
		t.Fatalf("delivered %v, want %v", r.got, ts)
	}
	for i := range ts {
		if r.got[i] != ts[i] {
			t.Fatalf("delivered %v, want %v", r.got, ts)
		}
	}
}

// TestInboundOrder: a message waiting for its sealed frames holds back
// the later messages of its connection only; sealed frames that come
// first wait for their envelope.
func TestInboundOrder(t *testing.T) {
	r := newRecorder()
	a, b := []byte("a"), []byte("b")
	m1, env1, f1 := sealedMessage(t, 1, seq(minSealed, 1))
	r.message(a, m1, env1)
	r.message(a, plain(2), nil)
	r.message(b, plain(3), nil)
	r.want(t, 3)
	r.sealed(sealedConn, env1.tag, f1)
	r.want(t, 3, 1, 2)
	m4, env4, f4 := sealedMessage(t, 4, seq(8, 0), seq(minSealed, 4))
	r.sealed(sealedConn, env4.tag, f4) // before its envelope
	r.message(a, m4, env4)
	r.want(t, 3, 1, 2, 4)
	if r.busy() || len(r.dropped) > 0 {
		t.Fatalf("busy %v, dropped %v after every message arrived whole", r.busy(), r.dropped)
	}
}

// TestInboundLost: a message whose sealed frames never come is dropped as
// soon as a later one's arrive, or at its deadline; then the messages
// behind it go on.
func TestInboundLost(t *testing.T) {
	r := newRecorder()
	a := []byte("a")
	m1, env1, f1 := sealedMessage(t, 1, seq(minSealed, 1))
	closeFrames(f1) // lost
	m2, env2, f2 := sealedMessage(t, 2, seq(minSealed, 2))
	r.message(a, m1, env1)
	r.message(a, m2, env2)
	r.message(a, plain(3), nil)
	r.sealed(sealedConn, env2.tag, f2)
	r.want(t, 2, 3)
	if len(r.dropped) != 1 || !errors.Is(r.dropped[0], errSealedLost) {
		t.Fatalf("dropped %v, want message 1 lost", r.dropped)
	}

	m4, env4, f4 := sealedMessage(t, 4, seq(minSealed, 4))
	closeFrames(f4)
	r.message(a, m4, env4)
	r.message(a, plain(5), nil)
	r.clock = r.clock.Add(sealedWait - time.Second)
	r.tick()
	r.want(t, 2, 3)
	r.clock = r.clock.Add(2 * time.Second)
	r.tick()
	r.want(t, 2, 3, 5)
	if len(r.dropped) != 2 || r.busy() {
		t.Fatalf("dropped %v, busy %v: want message 4 lost at its deadline", r.dropped, r.busy())
	}
}

// sealedConn names a connection to the sealed route.
var sealedConn = []byte("s")

// TestInboundHeldBounded: sealed frames no envelope names are held at
// most heldMax at once and heldTTL long, and a replayed tag is refused.
// A connection that floods the route pushes out its own payloads, not
// another's.
func TestInboundHeldBounded(t *testing.T) {
	r := newRecorder()
	m, envOther, fsOther := sealedMessage(t, 100, seq(minSealed, 100))
	r.sealed([]byte("other"), envOther.tag, fsOther)
	var first [16]byte
	for i := range heldMax + 10 {
		_, env, fs := sealedMessage(t, int32(i), seq(minSealed, byte(i)))
		if i == 0 {
			first = env.tag
		}
		r.sealed(sealedConn, env.tag, fs)
	}
	if len(r.held) != heldMax {
		t.Fatalf("held %d payloads, want %d", len(r.held), heldMax)
	}
	if r.held[0].tag != envOther.tag {
		t.Fatal("another connection's payload was let go for the flood's")
	}
	if r.held[1].tag == first {
		t.Fatal("the flood's oldest payload was not the one let go")
	}
	// Its envelope comes: the message is whole.
	r.message([]byte("a"), m, envOther)
	r.want(t, 100)
	tag := r.held[0].tag
	_, _, fs := sealedMessage(t, 99, seq(minSealed, 9))
	r.sealed(sealedConn, tag, fs)
	if len(r.held) != heldMax-1 {
		t.Fatalf("a replayed tag was held again: %d payloads, want %d", len(r.held), heldMax-1)
	}
	r.clock = r.clock.Add(heldTTL + time.Second)
	r.tick()
	if r.busy() {
		t.Fatalf("%d payloads still held after %v", len(r.held), heldTTL)
	}
}

// BenchmarkSealOpen seals one frame and opens it in place, as a message
// the lender picks travels (MB/s of plaintext, sealed and opened once).
func BenchmarkSealOpen(b *testing.B) {
	for _, n := range []int{256 << 10, 2 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("bytes=%d", n), func(b *testing.B) {
			data := [][]byte{seq(n, 1)}
			b.SetBytes(int64(n))
			for b.Loop() {
				env, err := newEnvelope(data, maxFrame)
				if err != nil {
					b.Fatal(err)
				}
				frames, err := env.seal(data)
				if err != nil {
					b.Fatal(err)
				}
				m := &transport.Message{Data: make([][]byte, 1)}
				lent, err := env.open(m, frames, true)
				if err != nil {
					b.Fatal(err)
				}
				closeFrames(lent)
			}
		})
	}
}

// TestSealPoolReuses checks that a sealed frame's memory goes back to the
// pool when libzmq lets go of the frame, and that the next frame of its
// class takes it from there.
func TestSealPoolReuses(t *testing.T) {
	f, err := newCFrame(sealPoolMin + 1)
	if err != nil {
		t.Fatal(err)
	}
	data := unsafe.SliceData(f.bytes())
	before := poolHeld()
	f.close()
	if got := poolHeld(); got != before+sealPoolClass {
		t.Fatalf("the pool holds %d bytes after a frame was closed, want %d", got, before+sealPoolClass)
	}
	g, err := newCFrame(sealPoolClass)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if unsafe.SliceData(g.bytes()) != data {
		t.Error("a frame of the same class did not take the memory the last one gave back")
	}
	if got := poolHeld(); got != before {
		t.Errorf("the pool holds %d bytes after the memory was taken again, want %d", got, before)
	}
}
