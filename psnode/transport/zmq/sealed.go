package zmq

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	zmq4 "github.com/pebbe/zmq4"

	"github.com/spindle-ps/spindle/psnode/internal/pages"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// Sealed frames: with CURVE on, the data frames of minSealed bytes or
// more do not travel through CURVE's cipher, which keeps a quarter of
// plain ZeroMQ's goodput on large messages (BENCHMARKS.md). They go on a
// second connection to the peer, the sealed route, which has no ZeroMQ
// security mechanism: each such frame is sealed with AES-128-GCM (AES-NI
// and carry-less multiplication on amd64 and arm64) under a key drawn
// for that one message. The key travels on the CURVE connection, in an
// envelope frame before the message's meta, with a random tag that names
// the sealed frames and their plaintext lengths:
//
//	CURVE route:   [envelope: tag, key, (index, length)…][meta][data0]…[dataN]
//	sealed route:  [tag][sealed frame]…
//
// In the CURVE message the sealed frames are empty. The receiver joins the
// two by the tag, opens every sealed frame (a frame is cut in chunks of
// chunkSize bytes, each with its own nonce, the frame's index and the
// chunk's, and GCM tag; tagPlace shows the layout), and delivers the
// message in its place among the messages of its CURVE connection: a
// connection's messages keep their order. A frame opens in its own
// memory, which a message the lender picks (SetLender) then borrows, as
// it would a large frame received on a plain connection; otherwise into
// a new Go buffer. So what CURVE guarantees holds
// for sealed frames too: only a peer that passed CURVE's authentication
// can have a sealed frame accepted (the key is nowhere else), nobody else
// can read one, and a sealed frame altered, cut, moved to another message
// or position, or replayed is dropped with its message. Only a client
// with the route's password, which every node of the job derives from
// its keys, can open a connection to the sealed route (a PLAIN handshake
// checked by the transport's ZAP handler; see secureSealedServer); what
// the receiver keeps of the payloads no envelope names is bounded
// (heldMax payloads, heldTTL; a connection that holds more than the
// others gives way first).
//
// A frame whose sealed form would be longer than maxFrame, which every
// socket of the transport accepts at most (see Options.Curve), travels
// pieced: in several frames of the sealed route, each of whole chunks,
// every chunk's tag right after its ciphertext,
//
//	[ct0][tag0][ct1][tag1]…   …[ctK-1][tagK-1]
//
// and it opens into new memory. The envelope marks such a frame; the
// receiver takes the pieces in order and needs no more of their layout.
//
// A sender learns where its peer's sealed route is by asking on the CURVE
// connection once it opens it (ctlHello); the peer answers with the port
// (ctlRoute), 0 when it has none. Until the answer arrives, and whenever
// the sealed route has no connection (it is ZMQ_IMMEDIATE: a message is
// queued only on a connection), the whole message goes through CURVE as
// before. A peer without a sealed route (one without CURVE, or an older
// one, which does not answer) never gets sealed frames.
const (
	// minSealed is the size from which a data frame is sealed.
	minSealed = minBorrowed
	// sealChunk and minChunk bound the plaintext of one GCM seal
	// (chunkSize); chunks are sealed and opened in parallel.
	sealChunk = 1 << 20
	minChunk  = 256 << 10
	// sealOverhead is GCM's tag, added to every chunk.
	sealOverhead = 16
	// maxSealedFrame bounds the plaintext length an envelope may announce.
	maxSealedFrame = 1 << 40
	// maxPayloadFrames bounds the frames of one message on the sealed
	// route: pieces of 16 MiB make 1 TiB.
	maxPayloadFrames = 1 << 16
	// heldMax bounds the sealed payloads held for an envelope yet to come;
	// the oldest goes first.
	heldMax = 64
	// heldTTL is how long a payload waits for its envelope.
	heldTTL = 30 * time.Second
	// sealedWait and sealedWaitRate bound how long a message waits for its
	// sealed frames once its envelope is in: sealedWait plus a second per
	// sealedWaitRate bytes. A payload lost on a broken sealed connection is
	// given up sooner, as soon as a later payload of the same sender
	// arrives (the sealed route is first in, first out).
	sealedWait     = 10 * time.Second
	sealedWaitRate = 10 << 20
)

// The transport's own frames on the CURVE connection. Each starts with a
// zero byte, which no meta of more than one byte starts with (a meta is a
// Thrift struct, and a zero byte is its end).
var (
	// ctlHello names the sealed frames' layout: "sealed3" since frames
	// may be pieced. A peer of another layout does not answer, and then
	// gets whole messages through CURVE.
	ctlHello    = []byte("\x00spindle:sealed3?")
	ctlRoute    = []byte("\x00spindle:sealed=")
	ctlEnvelope = []byte("\x00spindle:sealed:")
)

// envelope is what the CURVE connection carries of a message's sealed
// frames.
type envelope struct {
	tag    [16]byte
	key    [16]byte
	frames []sealedFrame
	// maxFrame is the sender's bound on a frame of the sealed route,
	// which sets the pieces of a pieced frame; the receiver needs it not.
	maxFrame int
}

// sealedFrame is one sealed data frame: its index among the message's data
// frames, its plaintext length, and whether it travels pieced.
type sealedFrame struct {
	index  int
	length int
	pieced bool
}

// piecedFlag marks a pieced frame in the index byte of its envelope entry.
const piecedFlag = 0x80

// encode appends the envelope frame to dst.
func (e *envelope) encode(dst []byte) []byte {
	dst = append(dst, ctlEnvelope...)
	dst = append(dst, e.tag[:]...)
	dst = append(dst, e.key[:]...)
	dst = append(dst, byte(len(e.frames)))
	for _, f := range e.frames {
		b := byte(f.index)
		if f.pieced {
			b |= piecedFlag
		}
		dst = append(dst, b)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(f.length))
	}
	return dst
}

// decodeEnvelope decodes an envelope frame. Every length is bounded: at
// most transport.MaxDataFrames sealed frames, at increasing indices below
// that limit, each of 1 to maxSealedFrame bytes.
func decodeEnvelope(b []byte) (envelope, error) {
	var e envelope
	if !bytes.HasPrefix(b, ctlEnvelope) {
		return e, fmt.Errorf("%w: not an envelope", transport.ErrMalformed)
	}
	b = b[len(ctlEnvelope):]
	if len(b) < 33 {
		return e, fmt.Errorf("%w: envelope of %d bytes", transport.ErrMalformed, len(b))
	}
	copy(e.tag[:], b)
	copy(e.key[:], b[16:])
	n := int(b[32])
	b = b[33:]
	if n == 0 || n > transport.MaxDataFrames || len(b) != 9*n {
		return e, fmt.Errorf("%w: envelope of %d sealed frames in %d bytes", transport.ErrMalformed, n, len(b))
	}
	e.frames = make([]sealedFrame, n)
	for i := range e.frames {
		idx := int(b[9*i] &^ piecedFlag)
		pieced := b[9*i]&piecedFlag != 0
		length := binary.LittleEndian.Uint64(b[9*i+1:])
		switch {
		case idx >= transport.MaxDataFrames:
			return e, fmt.Errorf("%w: sealed frame index %d", transport.ErrMalformed, idx)
		case i > 0 && idx <= e.frames[i-1].index:
			return e, fmt.Errorf("%w: sealed frame indices out of order", transport.ErrMalformed)
		case length == 0 || length > maxSealedFrame:
			return e, fmt.Errorf("%w: sealed frame of %d bytes", transport.ErrMalformed, length)
		}
		e.frames[i] = sealedFrame{index: idx, length: int(length), pieced: pieced}
	}
	return e, nil
}

// sealedLen is the length of a frame of n plaintext bytes once sealed.
func sealedLen(n int) int {
	c := chunkSize(n)
	return n + sealOverhead*((n+c-1)/c)
}

// sealNonce is the nonce of chunk c of the data frame at index i; a key
// seals one message only, so the pair is unique under it.
func sealNonce(i, c int) [12]byte {
	var n [12]byte
	binary.LittleEndian.PutUint32(n[:], uint32(i))
	binary.LittleEndian.PutUint64(n[4:], uint64(c))
	return n
}

// newEnvelope draws a tag and a key for the frames of data of minSealed
// bytes or more, pieced when sealed they would be longer than maxFrame;
// it returns nil when there is none.
func newEnvelope(data [][]byte, maxFrame int) (*envelope, error) {
	e := envelope{maxFrame: maxFrame}
	for i, d := range data {
		if len(d) >= minSealed {
			e.frames = append(e.frames, sealedFrame{index: i, length: len(d), pieced: sealedLen(len(d)) > maxFrame})
		}
	}
	if len(e.frames) == 0 {
		return nil, nil
	}
	if _, err := rand.Read(e.tag[:]); err != nil {
		return nil, err
	}
	if _, err := rand.Read(e.key[:]); err != nil {
		return nil, err
	}
	return &e, nil
}

// chunkJob is one chunk of one sealed frame.
type chunkJob struct {
	frame int // position in envelope.frames
	chunk int
}

// eachChunk runs do over every chunk of e's frames, the even chunks of
// each frame first, then the odd ones: sealing or opening a chunk lends
// the first sealOverhead bytes of the next one for a moment (see
// tagPlace), so neighbours never run at once. Within a turn the chunks run
// in parallel (one goroutine per processor, cpuProcs, at most 8) when
// they add up to two minChunk (512 KiB) or more; each goroutine has its
// own AEAD. It returns the first error.
func (e *envelope) eachChunk(do func(aead cipher.AEAD, j chunkJob) error) error {
	for turn := range 2 {
		var jobs []chunkJob
		total := 0
		for fi, f := range e.frames {
			for c := turn; c*chunkSize(f.length) < f.length; c += 2 {
				lo, hi := chunkOf(f.length, c)
				total += hi - lo
				jobs = append(jobs, chunkJob{frame: fi, chunk: c})
			}
		}
		if err := e.runChunks(jobs, total, do); err != nil {
			return err
		}
	}
	return nil
}

// runChunks runs do over jobs, of total bytes, as eachChunk says.
func (e *envelope) runChunks(jobs []chunkJob, total int, do func(aead cipher.AEAD, j chunkJob) error) error {
	newAEAD := func() (cipher.AEAD, error) {
		b, err := aes.NewCipher(e.key[:])
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	}
	workers := min(cpuProcs(), 8, total/minChunk, len(jobs))
	if workers <= 1 {
		if len(jobs) == 0 {
			return nil
		}
		aead, err := newAEAD()
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if err := do(aead, j); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			aead, err := newAEAD()
			for err == nil {
				k := int(next.Add(1)) - 1
				if k >= len(jobs) {
					return
				}
				err = do(aead, jobs[k])
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return first
}

// chunkSize is the plaintext of one GCM seal in a frame of n bytes: a
// quarter of the frame in whole minChunk, from minChunk to sealChunk, so
// that a frame of 1 MiB or more has chunks for two goroutines in each
// turn of eachChunk.
func chunkSize(n int) int {
	return min(max((n/4)&^(minChunk-1), minChunk), sealChunk)
}

// chunkOf is the plaintext range of chunk c of a frame of n bytes.
func chunkOf(n, c int) (lo, hi int) {
	size := chunkSize(n)
	lo = c * size
	return lo, min(lo+size, n)
}

// tagPlace is where the GCM tag of chunk c of a sealed frame of n
// plaintext bytes lies. A sealed frame is its chunks' ciphertexts, end to
// end at the plaintext's offsets, then their tags: the last chunk's
// first, where GCM puts it, then the others' in order.
//
//	[ct0][ct1]…[ctK-1][tagK-1][tag0][tag1]…[tagK-2]
//
// So a frame opens in place into its first n bytes, contiguous, which
// the message can then borrow: GCM wants a chunk's tag right after its
// ciphertext, where the next chunk's ciphertext lies, so sealing or
// opening chunk c (below the last) sets its tag there and puts the next
// chunk's first bytes back afterwards (withTagAfter).
func tagPlace(n, c int) int {
	if hi := (c + 1) * chunkSize(n); hi >= n {
		return n
	}
	return n + sealOverhead*(c+1)
}

// withTagAfter runs op on chunk c's ciphertext followed by its tag, in
// b, the sealed frame of n plaintext bytes: b[lo:hi+sealOverhead]. Below
// the last chunk, what lies after the ciphertext is kept and put back;
// the tag is moved to its place after sealing, from it before opening.
func withTagAfter(b []byte, n, c int, sealing bool, op func(sealed []byte) error) error {
	lo, hi := chunkOf(n, c)
	at := tagPlace(n, c)
	if at == hi {
		return op(b[lo : hi+sealOverhead])
	}
	var next [sealOverhead]byte
	copy(next[:], b[hi:])
	if !sealing {
		copy(b[hi:hi+sealOverhead], b[at:])
	}
	err := op(b[lo : hi+sealOverhead])
	if sealing {
		copy(b[at:at+sealOverhead], b[hi:])
	}
	copy(b[hi:], next[:])
	return err
}

// seal seals the frames e names from data into frames of libzmq's
// memory, to be sent on the sealed route after the tag: one frame for
// each, or its pieces for a pieced frame.
func (e *envelope) seal(data [][]byte) ([]*cFrame, error) {
	var out []*cFrame
	fail := func(err error) ([]*cFrame, error) {
		closeFrames(out)
		return nil, err
	}
	first := make([]int, len(e.frames)) // where each frame starts in out
	for i, f := range e.frames {
		first[i] = len(out)
		lengths := []int{sealedLen(f.length)}
		if f.pieced {
			lengths = pieceLens(f.length, e.maxFrame)
		}
		if len(out)+len(lengths) > maxPayloadFrames {
			return fail(fmt.Errorf("a message of more than %d frames on the sealed route", maxPayloadFrames))
		}
		for _, n := range lengths {
			c, err := newCFrame(n)
			if err != nil {
				return fail(fmt.Errorf("make a sealed frame of %d bytes: %w", n, err))
			}
			out = append(out, c)
		}
	}
	err := e.eachChunk(func(aead cipher.AEAD, j chunkJob) error {
		f := e.frames[j.frame]
		lo, hi := chunkOf(f.length, j.chunk)
		nonce := sealNonce(f.index, j.chunk)
		if f.pieced {
			per := pieceChunks(f.length, e.maxFrame)
			at := (j.chunk % per) * (chunkSize(f.length) + sealOverhead)
			dst := out[first[j.frame]+j.chunk/per].bytes()[at:]
			aead.Seal(dst[:0], nonce[:], data[f.index][lo:hi], nil)
			return nil
		}
		return withTagAfter(out[first[j.frame]].bytes(), f.length, j.chunk, true, func(dst []byte) error {
			aead.Seal(dst[:0], nonce[:], data[f.index][lo:hi], nil)
			return nil
		})
	})
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// pieceChunks is the number of chunks in a piece of a pieced frame of n
// plaintext bytes, the last piece excepted: as many as maxFrame holds.
func pieceChunks(n, maxFrame int) int {
	return max(maxFrame/(chunkSize(n)+sealOverhead), 1)
}

// pieceLens are the lengths of the pieces of a pieced frame of n
// plaintext bytes.
func pieceLens(n, maxFrame int) []int {
	size, per := chunkSize(n), pieceChunks(n, maxFrame)
	var lens []int
	for lo := 0; lo < n; lo += per * size {
		hi := min(lo+per*size, n)
		chunks := (hi - lo + size - 1) / size
		lens = append(lens, hi-lo+chunks*sealOverhead)
	}
	return lens
}

// takePieces takes the pieces of the pieced frame f from sealed, from k
// on, each of whole chunks: it returns every chunk's ciphertext and tag,
// and where the next frame's pieces start.
func takePieces(f sealedFrame, sealed []*cFrame, k int) ([][]byte, int, error) {
	n := f.length
	var (
		chunks [][]byte
		b      []byte
	)
	for c := 0; c*chunkSize(n) < n; c++ {
		lo, hi := chunkOf(n, c)
		need := hi - lo + sealOverhead
		if len(b) == 0 {
			if k >= len(sealed) {
				return nil, k, fmt.Errorf("%w: the pieces of sealed frame %d end before its chunk %d", transport.ErrMalformed, f.index, c)
			}
			b = sealed[k].bytes()
			k++
		}
		if len(b) < need {
			return nil, k, fmt.Errorf("%w: a piece of sealed frame %d cuts its chunk %d", transport.ErrMalformed, f.index, c)
		}
		chunks, b = append(chunks, b[:need:need]), b[need:]
	}
	if len(b) != 0 {
		return nil, k, fmt.Errorf("%w: %d bytes after the last chunk of sealed frame %d", transport.ErrMalformed, len(b), f.index)
	}
	return chunks, k, nil
}

// open opens the sealed frames of a payload into m's data frames, which
// hold empty placeholders at their indices. inPlace opens each frame not
// pieced in its own memory, which m's data frame then is: open returns
// those frames for the caller to lend to m (lendKept). Otherwise, and for
// pieced frames, it opens them into new Go memory and closes them. On an
// error, which wraps transport.ErrMalformed, it closes them all.
func (e *envelope) open(m *transport.Message, sealed []*cFrame, inPlace bool) (_ []*cFrame, err error) {
	defer func() {
		if err != nil || !inPlace {
			closeFrames(sealed)
		}
	}()
	var (
		plain  = make([][]byte, len(e.frames))
		whole  = make([][]byte, len(e.frames))   // each frame not pieced, sealed
		chunks = make([][][]byte, len(e.frames)) // each pieced frame's chunks, sealed
		pieces = make([]bool, len(sealed))       // which of sealed are pieces
		k      int
	)
	for i, f := range e.frames {
		if f.index >= len(m.Data) || len(m.Data[f.index]) != 0 {
			return nil, fmt.Errorf("%w: sealed frame %d has no empty place in the message", transport.ErrMalformed, f.index)
		}
		if f.pieced {
			from := k
			if chunks[i], k, err = takePieces(f, sealed, k); err != nil {
				return nil, err
			}
			for p := from; p < k; p++ {
				pieces[p] = true
			}
			plain[i] = make([]byte, f.length)
			continue
		}
		if k >= len(sealed) {
			return nil, fmt.Errorf("%w: %d sealed frames for an envelope of more", transport.ErrMalformed, len(sealed))
		}
		b := sealed[k].bytes()
		k++
		if len(b) != sealedLen(f.length) {
			return nil, fmt.Errorf("%w: sealed frame %d of %d bytes, want %d", transport.ErrMalformed, f.index, len(b), sealedLen(f.length))
		}
		whole[i] = b
		if inPlace {
			plain[i] = b[:f.length]
		} else {
			plain[i] = make([]byte, f.length)
		}
	}
	if k != len(sealed) {
		return nil, fmt.Errorf("%w: %d sealed frames for an envelope of %d", transport.ErrMalformed, len(sealed), k)
	}
	err = e.eachChunk(func(aead cipher.AEAD, j chunkJob) error {
		f := e.frames[j.frame]
		lo, hi := chunkOf(f.length, j.chunk)
		dst := plain[j.frame][lo:hi]
		if !inPlace || f.pieced {
			pages.Advise(dst, 4<<10, pages.Populate)
		}
		nonce := sealNonce(f.index, j.chunk)
		open := func(src []byte) error {
			if _, err := aead.Open(dst[:0], nonce[:], src, nil); err != nil {
				return fmt.Errorf("%w: sealed frame %d, chunk %d: %v", transport.ErrMalformed, f.index, j.chunk, err)
			}
			return nil
		}
		if f.pieced {
			return open(chunks[j.frame][j.chunk])
		}
		return withTagAfter(whole[j.frame], f.length, j.chunk, false, open)
	})
	if err != nil {
		return nil, err
	}
	for i, f := range e.frames {
		m.Data[f.index] = plain[i]
		m.WireSize += f.length
	}
	if !inPlace {
		return nil, nil
	}
	var lend []*cFrame
	for i, f := range sealed {
		if pieces[i] {
			f.close()
		} else {
			lend = append(lend, f)
		}
	}
	return lend, nil
}

// sealedEndpoint is the endpoint of the sealed route of the peer at
// endpoint (as Connect resolved it), whose answer named port: the same
// host at that port over TCP; beside the peer's socket file, with the
// extension ".sealed" for ".ipc", in Local mode. It reports false when
// endpoint has neither form.
func sealedEndpoint(endpoint string, port uint16) (string, bool) {
	if port == 0 {
		return "", false
	}
	if rest, ok := strings.CutPrefix(endpoint, "ipc://"); ok {
		return "ipc://" + sealedIPCPath(rest), strings.HasSuffix(rest, ".ipc")
	}
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok || port == 0 {
		return "", false
	}
	host, _, err := net.SplitHostPort(rest)
	if err != nil {
		return "", false
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(int(port))), true
}

// routeAnswer is the answer to ctlHello: the port of the sealed route, 0
// when there is none; and that packed messages are read (a peer that
// answers reads them).
func routeAnswer(port uint16) []byte {
	return binary.BigEndian.AppendUint16(bytes.Clone(ctlRoute), port)
}

// parseRouteAnswer reads an answer to ctlHello.
func parseRouteAnswer(b []byte) (uint16, bool) {
	rest, ok := bytes.CutPrefix(b, ctlRoute)
	if !ok || len(rest) != 2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(rest), true
}

// errSealedLost is why a message whose sealed frames never came is
// dropped.
var errSealedLost = errors.New("its sealed frames never arrived")

// sealedOn reports whether the transport seals large frames: with CURVE,
// unless Options.NoSealed.
func (t *Transport) sealedOn() bool {
	return t.opts.Curve != nil && !t.opts.NoSealed
}

// bindSealed binds s, the ROUTER of the sealed route, beside the CURVE
// ROUTER bound at endpoint on port: on another port of the same host over
// TCP, at the socket file with the extension ".sealed" in Local mode. It
// returns the port to answer to ctlHello.
func (t *Transport) bindSealed(s *zmq4.Socket, endpoint string, port uint16) (uint16, error) {
	if err := t.secureSealedServer(s); err != nil {
		return 0, err
	}
	if err := t.boundFrames(s, maxFrame); err != nil {
		return 0, err
	}
	if rest, ok := strings.CutPrefix(endpoint, "ipc://"); ok {
		ep := "ipc://" + sealedIPCPath(rest)
		if err := s.Bind(ep); err != nil {
			return 0, fmt.Errorf("bind the sealed route %s: %w", ep, err)
		}
		return port, nil
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(endpoint, "tcp://"))
	if err != nil {
		return 0, fmt.Errorf("the sealed route beside %s: %w", endpoint, err)
	}
	if strings.Contains(endpoint, "[") {
		if err := s.SetIpv6(true); err != nil {
			return 0, fmt.Errorf("set ZMQ_IPV6: %w", err)
		}
	}
	if rawSocket(s, zmq4.ROUTER) == nil {
		return 0, errors.New("the sealed route's libzmq socket is out of reach")
	}
	ep := "tcp://" + net.JoinHostPort(host, "*")
	if err := s.Bind(ep); err != nil {
		return 0, fmt.Errorf("bind the sealed route %s: %w", ep, err)
	}
	return boundPort(s)
}

// readSealed reads one message of the sealed route, [identity][tag]
// [sealed frame]…, keeping the sealed frames in libzmq's memory: the
// connection's identity, the tag and the frames. It returns ok false for
// a message that is not of that form (it is dropped), and an EAGAIN error
// when nothing is waiting.
func readSealed(raw unsafe.Pointer) (conn []byte, tag [16]byte, frames []*cFrame, ok bool, err error) {
	id, more, err := recvCFrame(raw, zmq4.DONTWAIT)
	if err != nil {
		return nil, tag, nil, false, err
	}
	conn = bytes.Clone(id.bytes())
	id.close()
	n := 0
	for more {
		var f *cFrame
		if f, more, err = recvCFrame(raw, 0); err != nil {
			closeFrames(frames)
			return conn, tag, nil, false, err
		}
		n++
		switch {
		case n == 1:
			b := f.bytes()
			ok = len(b) == len(tag)
			copy(tag[:], b)
			f.close()
		case n-1 <= maxPayloadFrames:
			frames = append(frames, f)
		default:
			f.close()
		}
	}
	if !ok || len(frames) == 0 || n-1 > maxPayloadFrames {
		closeFrames(frames)
		return conn, tag, nil, false, nil
	}
	return conn, tag, frames, true, nil
}

// learnRoute reads the peer's answer to ctlHello, which comes back on
// the DEALER: the peer reads packed messages, and has its sealed route at
// sealedEP (empty when it has none). sem must be held.
func (p *peer) learnRoute() {
	for {
		b, err := p.sock.RecvBytes(zmq4.DONTWAIT)
		if err != nil {
			return
		}
		if port, ok := parseRouteAnswer(b); ok {
			p.answered = true
			p.sealedEP, _ = sealedEndpoint(p.endpoint, port)
		}
	}
}

// openSealed connects a DEALER to the peer's sealed route at sealedEP.
// The socket is ZMQ_IMMEDIATE: it queues a message only on a connection,
// so that sealed frames never wait for a connection that may not come
// (send then uses CURVE alone). sem must be held.
func (p *peer) openSealed() error {
	ep := p.sealedEP
	s, err := p.t.zctx.NewSocket(zmq4.DEALER)
	if err != nil {
		return fmt.Errorf("new DEALER socket: %w", err)
	}
	fail := func(err error) error {
		_ = s.Close()
		return err
	}
	if err := s.SetLinger(0); err != nil {
		return fail(fmt.Errorf("set ZMQ_LINGER: %w", err))
	}
	if err := s.SetImmediate(true); err != nil {
		return fail(fmt.Errorf("set ZMQ_IMMEDIATE: %w", err))
	}
	if err := p.t.secureSealedClient(s); err != nil {
		return fail(err)
	}
	if err := p.t.boundFrames(s, maxAnswer); err != nil {
		return fail(err)
	}
	if err := setReconnect(s); err != nil {
		return fail(err)
	}
	if wm := p.t.opts.WaterMark; wm > 0 {
		if err := s.SetSndhwm(wm); err != nil {
			return fail(fmt.Errorf("set ZMQ_SNDHWM: %w", err))
		}
	}
	if strings.HasPrefix(ep, "tcp://[") {
		if err := s.SetIpv6(true); err != nil {
			return fail(fmt.Errorf("set ZMQ_IPV6: %w", err))
		}
	}
	raw := rawSocket(s, zmq4.DEALER)
	if raw == nil {
		return fail(errors.New("the libzmq socket is out of reach"))
	}
	if err := s.Connect(ep); err != nil {
		return fail(fmt.Errorf("connect %s: %w", ep, err))
	}
	p.sealed, p.sealedRaw = s, raw
	p.sealedPoll = zmq4.NewPoller()
	p.sealedPoll.Add(s, zmq4.POLLOUT)
	return nil
}

// dropSealed closes the sealed route's socket, with what it queued; the
// next large message opens it again. sem must be held.
func (p *peer) dropSealed() {
	if p.sealed != nil {
		_ = p.sealed.Close()
		p.sealed, p.sealedRaw, p.sealedPoll = nil, nil, nil
	}
}

// sendSealed sends a message with data frames of minSealed bytes or more
// as an envelope on the CURVE connection and sealed frames on the sealed
// route, the sealed frames first. It reports false, having sent nothing,
// when the sealed route cannot take the message now (not learnt yet, no
// connection, its queue full): the caller sends the message through CURVE
// alone. sem must be held.
func (p *peer) sendSealed(ctx context.Context, meta []byte, data [][]byte) (bool, error) {
	if p.sealedEP == "" {
		return false, nil // not learnt yet, or the peer has no sealed route
	}
	if p.sealed == nil {
		if err := p.openSealed(); err != nil {
			p.t.log.WithError(err).WithField("peer", p.id).Debug("zmq: no sealed route; large frames go through CURVE")
			p.sealedEP = ""
			return false, nil
		}
	}
	if polled, err := p.sealedPoll.Poll(0); err != nil || len(polled) == 0 {
		return false, nil // no connection yet, or the queue is full
	}
	env, err := newEnvelope(data, maxFrame)
	if err != nil || env == nil {
		return false, err
	}
	frames, err := env.seal(data)
	if err != nil {
		return false, err
	}
	if !p.writeSealed(env.tag, frames) {
		return false, nil
	}
	// The envelope and the rest of the message, the sealed frames' places
	// left empty. From the first frame on the message must be finished.
	if err := p.write(ctx, env.encode(nil), zmq4.SNDMORE, nil); err != nil {
		return true, err // the sealed frames wait at the peer until heldTTL
	}
	rest := context.WithoutCancel(ctx)
	err = p.write(rest, meta, zmq4.SNDMORE, nil)
	next := 0
	for i := 0; err == nil && i < len(data); i++ {
		flags := zmq4.SNDMORE
		if i == len(data)-1 {
			flags = 0
		}
		d := data[i]
		if next < len(env.frames) && env.frames[next].index == i {
			d, next = nil, next+1
		}
		err = p.write(rest, d, flags, nil)
	}
	if err != nil {
		p.drop() // it holds part of a message
		return true, err
	}
	p.t.sealed.Add(1)
	return true, nil
}

// writeSealed queues [tag][frame]… on the sealed route without waiting.
// It reports false when the route cannot take it: no connection, its
// queue full, or a failure, after which the socket is dropped (it may hold
// part of a message) and opened again for the next one. The frames are
// libzmq's from then on, or closed. sem must be held.
func (p *peer) writeSealed(tag [16]byte, frames []*cFrame) bool {
	failed := func(err error) bool {
		p.t.log.WithError(err).WithField("peer", p.id).Debug("zmq: the sealed route failed; it is opened again for the next large message")
		p.dropSealed()
		return false
	}
	if _, err := p.sealed.SendBytes(tag[:], zmq4.SNDMORE|zmq4.DONTWAIT); err != nil {
		closeFrames(frames)
		if isErrno(err, syscall.EAGAIN) {
			return false
		}
		return failed(err)
	}
	for i, f := range frames {
		flags := zmq4.SNDMORE | zmq4.DONTWAIT
		if i == len(frames)-1 {
			flags = zmq4.DONTWAIT
		}
		// ZeroMQ takes the rest of a started message at once.
		if err := f.send(p.sealedRaw, flags); err != nil {
			closeFrames(frames[i:])
			return failed(fmt.Errorf("sealed frame %d: %w", i, err))
		}
	}
	return true
}
