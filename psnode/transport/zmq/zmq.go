package zmq

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	zmq4 "github.com/pebbe/zmq4"
	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/internal/awake"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// DefaultInboxSize is the inbox size used when Options.InboxSize is zero.
const DefaultInboxSize = 1024

// pollInterval bounds how long a Send waiting for room in a full outbound
// queue goes without looking at its context and at Close. It is the
// timeout of a zmq_poll on the socket, which returns as soon as there is
// room: it adds no latency to a Send that can proceed.
const pollInterval = 50 * time.Millisecond

// recvBackstop bounds how long the receive loop waits in zmq_poll without
// looking at Close. Close wakes the loop at once through the wake socket;
// the backstop only matters if that wake were lost.
const recvBackstop = time.Second

// wakeEndpoint is the inproc endpoint Close uses to wake the receive
// loop. Inproc names are scoped to a ZeroMQ context, and every Transport
// has its own.
const wakeEndpoint = "inproc://spindle-zmq-wake"

// Options configures a Transport. The zero value is a TCP transport with
// ZeroMQ's default high-water mark.
type Options struct {
	// Local makes the transport use ipc:// endpoints under IPCDir instead
	// of TCP, for jobs whose nodes all run on this machine (ps-lite's
	// DMLC_LOCAL). Addresses keep the form "host:port": the port names the
	// endpoint and the host is ignored, so every node of the job must set
	// Local and use the same IPCDir. Default false.
	Local bool

	// IPCDir is the directory of the ipc endpoints when Local is set; it
	// is created (mode 0700) if missing. Its path plus "/65535.sealed" must
	// fit the 107 bytes of a Unix socket address. Empty means
	// os.TempDir()/spindle-ipc-<uid>.
	IPCDir string

	// WaterMark, when positive, is ZMQ_SNDHWM of each outbound socket: the
	// number of messages queued for one peer before Send waits for room
	// (ps-lite's DMLC_PS_WATER_MARK). Zero keeps ZeroMQ's default of 1000.
	WaterMark int

	// InboxSize is the number of received messages held for Recv. When it
	// is full the receive loop stops reading, and ZeroMQ's own queues and
	// TCP push back on the senders; nothing is dropped. Zero means
	// DefaultInboxSize.
	InboxSize int

	// Logger receives debug entries for dropped malformed input and error
	// entries from the receive loop. Nil discards them.
	Logger *logrus.Entry

	// Curve, when set, encrypts and authenticates every connection with
	// the job's CURVE keys (see Curve and curve.go), data frames of
	// 64 KiB or more are sealed on a route of their own (see sealed.go),
	// and no socket takes a frame of more than 16 MiB (see split.go).
	// Nil is plain ZeroMQ.
	Curve *Curve

	// NoSealed, with Curve, sends every frame through CURVE, large ones
	// too: for benchmarks of CURVE alone.
	NoSealed bool

	// BusyPoll keeps this machine's processors from idling while the
	// process exchanges messages: spinner threads of Linux's lowest
	// scheduling class (SCHED_IDLE), one per processor and shared by
	// every transport of the process, spin for 2 ms after each message
	// sent or received and sleep otherwise (see psnode/internal/awake).
	// A processor that idles can take tens of µs to wake for the next
	// message, in virtual machines above all. The spinners give way to
	// any thread that wakes, but their time shows as CPU time of the
	// process, a cgroup does not know it from work, and they cost where
	// the processors are busy anyway (BENCHMARKS.md):
	// leave it off where other jobs share the machine under CPU shares
	// or quotas. Default false.
	BusyPoll bool
}

// Validate reports every invalid field of o.
func (o Options) Validate() error {
	var errs []error
	if o.WaterMark < 0 {
		errs = append(errs, fmt.Errorf("zmq: WaterMark %d is negative", o.WaterMark))
	}
	if o.InboxSize < 0 {
		errs = append(errs, fmt.Errorf("zmq: InboxSize %d is negative", o.InboxSize))
	}
	if o.Local && o.IPCDir != "" && len(o.IPCDir)+len("/65535.sealed") > maxIPCPath {
		errs = append(errs, fmt.Errorf("zmq: IPCDir %q is too long for a Unix socket path", o.IPCDir))
	}
	return errors.Join(errs...)
}

// Stats counts a Transport's messages.
type Stats struct {
	Sent      uint64 // messages handed to ZeroMQ by Send
	Received  uint64 // well-formed messages read from peers, for Recv
	Malformed uint64 // messages from peers dropped because they did not decode or check
	Lent      uint64 // data frames Send had ZeroMQ write from the caller's memory, without a copy
	Sealed    uint64 // messages Send sent with sealed frames (Options.Curve)
	Packed    uint64 // messages Send sent packed into one frame
	Lost      uint64 // messages from peers dropped because their sealed frames never arrived
	Borrowed  uint64 // data frames Recv handed over as libzmq's buffers, without a copy (SetLender)
	Refused   uint64 // connections refused by authentication (Options.Curve): on the CURVE route or the sealed one
}

// Transport is the ZeroMQ implementation of transport.Transport. See the
// package documentation for its sockets and wire format.
//
// A Transport is safe for concurrent use.
type Transport struct {
	opts   Options
	log    *logrus.Entry
	zctx   *zmq4.Context
	ipcDir string

	inbox    chan *transport.Message
	done     chan struct{} // closed when Close starts
	closed   chan struct{} // closed when Close has finished
	recvDead chan struct{} // closed if the receive loop fails
	recvErr  error         // why the receive loop failed; set before recvDead is closed

	mu        sync.Mutex
	closing   bool
	listening bool
	peers     map[int32]*peer
	wake      *zmq4.Socket   // Close's end of the wake pair; nil until Listen
	zapWake   *zmq4.Socket   // Close's end of the ZAP loop's wake pair; nil until startZAP
	ipcLock   *ipcLock       // the endpoint lock in Local mode
	ops       sync.WaitGroup // Listen, Connect and Disconnect calls creating or closing sockets; Add only under mu while !closing
	wg        sync.WaitGroup // the receive loop; Add only under mu while !closing
	zapOn     bool           // the ZAP handler runs (Options.Curve); guarded by mu

	// sealedPort is the port of the sealed route, answered to a peer's
	// ctlHello; 0 without one. Set by Listen before the receive loop
	// starts; a test may change what is answered (advertiseSealed).
	sealedPort      uint16
	advertiseSealed atomic.Uint32

	sent, received, malformed, lent, sealed, lost, packed, refused atomic.Uint64
	linger                                                         atomic.Int64 // Drain's, in ns

	// lender picks the messages whose large frames are handed over as
	// libzmq's buffers (SetLender); nil: none.
	lender      atomic.Pointer[func(*transport.Meta) bool]
	borrowed    atomic.Uint64 // frames received and lent (Stats.Borrowed)
	borrowedOut atomic.Int64  // of those, not given back yet
}

// SetLender makes lend pick, by its meta, each message whose data frames
// of 4 MiB or more Recv hands over as libzmq's own receive buffers rather
// than copies: the message is lent (transport.Message.Lend), and its
// receiver must Release it, or Own it, once it is done. lend runs on the
// receive loop and must not block; nil lends nothing (the default).
func (t *Transport) SetLender(lend func(*transport.Meta) bool) {
	if lend == nil {
		t.lender.Store(nil)
		return
	}
	t.lender.Store(&lend)
}

// lends reports whether the lender picks the message of meta m.
func (t *Transport) lends(m *transport.Meta) bool {
	lp := t.lender.Load()
	return lp != nil && (*lp)(m)
}

var (
	_ transport.Transport   = (*Transport)(nil)
	_ transport.ConnWatcher = (*Transport)(nil)
)

// New returns a transport with its own ZeroMQ context. It neither listens
// nor connects until told to.
func New(opts Options) (*Transport, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.InboxSize == 0 {
		opts.InboxSize = DefaultInboxSize
	}
	if opts.BusyPoll {
		awake.Start(runtime.NumCPU())
	}
	log := opts.Logger
	if log == nil {
		l := logrus.New()
		l.Out = io.Discard
		log = logrus.NewEntry(l)
	}
	dir := opts.IPCDir
	if opts.Local && dir == "" {
		var err error
		if dir, err = defaultIPCDir(); err != nil {
			return nil, err
		}
	}
	zctx, err := zmq4.NewContext()
	if err != nil {
		return nil, fmt.Errorf("zmq: new context: %w", err)
	}
	// MaxNodes peers at most (ps-lite's limit), each with its DEALER, its
	// sealed route's DEALER and the two PAIR sockets of its event monitor;
	// the ROUTER, the sealed route's ROUTER and the wake pair besides.
	if err := zctx.SetMaxSockets(4*transport.MaxNodes + 4); err != nil {
		_ = zctx.Term()
		return nil, fmt.Errorf("zmq: set ZMQ_MAX_SOCKETS: %w", err)
	}
	return &Transport{
		opts:     opts,
		log:      log,
		zctx:     zctx,
		ipcDir:   dir,
		inbox:    make(chan *transport.Message, opts.InboxSize),
		done:     make(chan struct{}),
		closed:   make(chan struct{}),
		recvDead: make(chan struct{}),
		peers:    make(map[int32]*peer),
	}, nil
}

// begin registers a call that creates or closes sockets, so that Close waits for it
// before terminating the context. It reports false after Close.
func (t *Transport) begin() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.ops.Add(1)
	return true
}

// Listen implements transport.Transport. It binds a ROUTER socket at
// tcp://host:port (port 0 picks a free port; an empty host means every
// interface) or, with Options.Local, at the ipc endpoint for port (port 0
// picks an unused one). It returns "host:port" with the bound port.
func (t *Transport) Listen(ctx context.Context, addr string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return "", fmt.Errorf("zmq: listen %q: %w", addr, err)
	}
	if !t.begin() {
		return "", transport.ErrClosed
	}
	defer t.ops.Done()
	t.mu.Lock()
	if t.listening {
		t.mu.Unlock()
		return "", fmt.Errorf("zmq: listen %q: already listening", addr)
	}
	t.listening = true
	t.mu.Unlock()

	bound, err := t.listen(ctx, host, port)
	if err != nil {
		t.mu.Lock()
		t.listening = false
		t.mu.Unlock()
		return "", fmt.Errorf("zmq: listen %q: %w", addr, err)
	}
	return bound, nil
}

func (t *Transport) listen(ctx context.Context, host string, port uint16) (_ string, err error) {
	var (
		endpoint string
		lock     *ipcLock
	)
	if t.opts.Local {
		if lock, err = lockIPC(t.ipcDir, port); err != nil {
			return "", err
		}
		defer func() {
			if err != nil {
				lock.release()
			}
		}()
		port = lock.port
		endpoint = "ipc://" + lock.endpoint
	} else {
		h, p := host, strconv.Itoa(int(port))
		if h == "" {
			h = "*"
		} else if h, err = bindAddress(ctx, host); err != nil {
			return "", err
		}
		if port == 0 {
			p = "*"
		}
		endpoint = "tcp://" + net.JoinHostPort(h, p)
	}

	var socks []*zmq4.Socket
	defer func() {
		if err != nil {
			for _, s := range socks {
				_ = s.Close()
			}
		}
	}()
	newSocket := func(typ zmq4.Type) (*zmq4.Socket, error) {
		s, err := t.zctx.NewSocket(typ)
		if err != nil {
			return nil, fmt.Errorf("new %v socket: %w", typ, err)
		}
		socks = append(socks, s)
		if err := s.SetLinger(0); err != nil {
			return nil, fmt.Errorf("set ZMQ_LINGER: %w", err)
		}
		return s, nil
	}
	router, err := newSocket(zmq4.ROUTER)
	if err != nil {
		return "", err
	}
	if err := t.secureServer(router); err != nil {
		return "", err
	}
	if err := t.boundFrames(router, maxFrame); err != nil {
		return "", err
	}
	if strings.Contains(endpoint, "[") {
		if err := router.SetIpv6(true); err != nil {
			return "", fmt.Errorf("set ZMQ_IPV6: %w", err)
		}
	}
	if err := router.Bind(endpoint); err != nil {
		return "", fmt.Errorf("bind %s: %w", endpoint, err)
	}
	if !t.opts.Local {
		if port, err = boundPort(router); err != nil {
			return "", err
		}
	}
	var sealed *zmq4.Socket
	var sealedPort uint16
	if t.sealedOn() && rawSocket(router, zmq4.ROUTER) != nil {
		if sealed, err = newSocket(zmq4.ROUTER); err != nil {
			return "", err
		}
		if sealedPort, err = t.bindSealed(sealed, endpoint, port); err != nil {
			return "", err
		}
	}
	wakeRecv, wakeSend, err := t.wakePair(wakeEndpoint)
	if err != nil {
		return "", err
	}
	socks = append(socks, wakeRecv, wakeSend)

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return "", transport.ErrClosed
	}
	t.wake, t.ipcLock = wakeSend, lock
	t.sealedPort = sealedPort
	t.advertiseSealed.Store(uint32(sealedPort))
	// The receive loop owns router, sealed and wakeRecv from here on.
	t.wg.Add(1)
	addProc()
	go t.recvLoop(router, sealed, wakeRecv)
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// boundPort is the TCP port s was bound to last.
func boundPort(s *zmq4.Socket) (uint16, error) {
	last, err := s.GetLastEndpoint()
	if err != nil {
		return 0, fmt.Errorf("get ZMQ_LAST_ENDPOINT: %w", err)
	}
	_, p, err := net.SplitHostPort(strings.TrimPrefix(last, "tcp://"))
	if err != nil {
		return 0, fmt.Errorf("parse ZMQ_LAST_ENDPOINT %q: %w", last, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("parse ZMQ_LAST_ENDPOINT %q: %w", last, err)
	}
	return uint16(n), nil
}

// bindAddress is the address a ROUTER binds for host: ZeroMQ binds an
// interface name or an IP address, not a host name, so a name (a
// NodeManager's host, "localhost") is resolved, its first IPv4 address
// preferred, as peers connecting to the name reach it. The bound port is
// still advertised under the name.
func bindAddress(ctx context.Context, host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil || host == "*" {
		return host, nil
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(rctx, host)
	if err != nil {
		return "", fmt.Errorf("resolve the host to bind: %w", err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("resolve the host to bind: %s has no address", host)
	}
	for _, a := range addrs {
		if a.IP.To4() != nil {
			return a.IP.String(), nil
		}
	}
	return addrs[0].IP.String(), nil
}

// resolveTimeout bounds the name lookup of Listen.
const resolveTimeout = 10 * time.Second

// splitAddr splits "host:port" and parses the port.
func splitAddr(addr string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", port, err)
	}
	return host, uint16(n), nil
}

// endpoint maps an address given to Connect to a ZeroMQ endpoint:
// "tcp://…" and "ipc://…" are used as they are; "host:port" means
// tcp://host:port, or with Options.Local the ipc endpoint of port.
func (t *Transport) endpoint(addr string) (string, error) {
	if strings.HasPrefix(addr, "tcp://") || strings.HasPrefix(addr, "ipc://") {
		return addr, nil
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return "", err
	}
	if port == 0 {
		return "", errors.New("port 0")
	}
	if t.opts.Local {
		return "ipc://" + ipcEndpoint(t.ipcDir, port), nil
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// wakePair makes a pair of PAIR sockets connected at the inproc endpoint
// ep, with which Close wakes a loop that polls recv.
func (t *Transport) wakePair(ep string) (recv, send *zmq4.Socket, err error) {
	var socks []*zmq4.Socket
	defer func() {
		if err != nil {
			for _, s := range socks {
				_ = s.Close()
			}
		}
	}()
	for range 2 {
		s, err := t.zctx.NewSocket(zmq4.PAIR)
		if err != nil {
			return nil, nil, fmt.Errorf("new PAIR socket: %w", err)
		}
		socks = append(socks, s)
		if err := s.SetLinger(0); err != nil {
			return nil, nil, fmt.Errorf("set ZMQ_LINGER: %w", err)
		}
	}
	recv, send = socks[0], socks[1]
	if err := recv.Bind(ep); err != nil {
		return nil, nil, fmt.Errorf("bind %s: %w", ep, err)
	}
	if err := send.Connect(ep); err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", ep, err)
	}
	return recv, send, nil
}

// recvLoop owns the ROUTER socket and, with CURVE, the sealed route's
// (nil without): it reads messages, joins them with their sealed frames
// (inbound), and hands them to Recv through the inbox until Close wakes
// it. It closes every socket it owns.
func (t *Transport) recvLoop(router, sealed, wake *zmq4.Socket) {
	defer t.wg.Done()
	defer dropProc()
	delivered := false
	in := newInbound(func(m *transport.Message) bool {
		t.received.Add(1) // before the hand-off, so that Recv sees it counted
		select {
		case t.inbox <- m:
			delivered = true
			return true
		case <-t.done:
			m.Release()
			return false
		}
	}, t.dropMalformed)
	in.lends, in.lend = t.lends, t.lendKept
	defer func() {
		in.close()
		_ = router.Close()
		if sealed != nil {
			_ = sealed.Close()
		}
		_ = wake.Close()
	}()
	raw := rawSocket(router, zmq4.ROUTER)
	poller := zmq4.NewPoller()
	poller.Add(router, zmq4.POLLIN)
	poller.Add(wake, zmq4.POLLIN)
	var sealedRaw unsafe.Pointer
	if sealed != nil {
		sealedRaw = rawSocket(sealed, zmq4.ROUTER)
		poller.Add(sealed, zmq4.POLLIN)
	}
	for {
		wait := recvBackstop
		if in.busy() {
			wait = tickInterval
		}
		polled, err := poller.Poll(wait)
		if err != nil {
			t.recvFailed(fmt.Errorf("zmq: poll: %w", err))
			return
		}
		if len(polled) > 0 {
			awake.Touch()
		}
		select {
		case <-t.done:
			return
		default:
		}
		for _, p := range polled {
			if p.Socket == wake {
				return
			}
		}
		if in.busy() && !in.tick() {
			return
		}
		delivered = false
		// The sealed route first: a message's sealed frames are sent
		// before its envelope.
		for sealedRaw != nil {
			conn, tag, frames, ok, err := readSealed(sealedRaw)
			if isErrno(err, syscall.EAGAIN) {
				break
			}
			if err != nil {
				t.recvFailed(fmt.Errorf("zmq: receive on the sealed route: %w", err))
				return
			}
			if !ok {
				t.dropMalformed(nil, nil, errors.New("not a sealed payload"))
				continue
			}
			if !in.sealed(conn, tag, frames) {
				return
			}
		}
		// Drain what the ROUTER holds; the rest of a multipart message is
		// always there once its first frame is.
		for {
			select {
			case <-t.done:
				return
			default:
			}
			id, m, env, err := t.readMessage(router, raw)
			if isErrno(err, syscall.EAGAIN) {
				if delivered {
					// Let the goroutine woken by the inbox run here, now,
					// before this one blocks in zmq_poll holding its P:
					// otherwise it waits for another thread to wake and
					// steal it, which costs tens of µs per message.
					runtime.Gosched()
				}
				break
			}
			if err != nil {
				t.recvFailed(fmt.Errorf("zmq: receive: %w", err))
				return
			}
			if m == nil {
				continue // malformed, dropped; or the transport's own
			}
			if !in.message(id, m, env) {
				return
			}
		}
	}
}

// lookInterval is how often a send looks for the peer's answer to
// ctlHello until it comes; a peer that never answers (an older Spindle)
// gets neither packed messages nor sealed frames.
const lookInterval = 20 * time.Millisecond

// tickInterval is how often the receive loop looks for messages that
// waited too long for their sealed frames, while any waits.
const tickInterval = 100 * time.Millisecond

// recvFailed records a receive loop failure, which Recv then returns.
// ZeroMQ reports none in normal operation.
func (t *Transport) recvFailed(err error) {
	select {
	case <-t.done:
		return // an error caused by Close is no failure
	default:
	}
	t.log.WithError(err).Error("receive loop stopped")
	t.recvErr = err
	close(t.recvDead)
}

// readMessage reads one message from the ROUTER:
//
//	+----------+------+-------+-----+-------+
//	| identity | meta | data0 | ... | dataN |
//	+----------+------+-------+-----+-------+
//
// The identity frame is the ROUTER's name for the connection; the sender
// is the one its meta names. With CURVE an envelope frame may come before
// the meta (sealed.go): readMessage returns it, and the message, whose
// sealed frames are still empty, is checked once they are in. A peer's
// ctlHello is answered here. A malformed message is counted and dropped:
// readMessage then returns a nil message, as for the transport's own. It
// returns an EAGAIN error when no message is waiting.
//
// raw is router's libzmq socket (see rawSocket), read directly when not
// nil.
func (t *Transport) readMessage(router *zmq4.Socket, raw unsafe.Pointer) (_ []byte, _ *transport.Message, _ *envelope, err error) {
	// Large frames of a message the lender picks stay in libzmq's
	// memory (kept), lent to the receiver; closed here unless they are.
	var fs [][]byte
	var kept []*cFrame
	var keep func() bool
	if lp := t.lender.Load(); lp != nil && raw != nil {
		decided, lend := false, false
		keep = func() bool {
			if !decided {
				decided = true
				if i := metaIndex(fs); i >= 0 {
					if mm, err := transport.DecodeMeta(fs[i]); err == nil {
						lend = (*lp)(&mm)
					}
				}
			}
			return lend
		}
	}
	defer func() {
		if kept != nil {
			closeFrames(kept)
		}
	}()
	recv := func(flags zmq4.Flag, data bool) ([]byte, bool, error) {
		if raw != nil {
			if !data {
				return recvFrame(raw, flags)
			}
			b, f, more, err := recvFrameOrKeep(raw, flags, keep)
			if f != nil {
				kept = append(kept, f)
			}
			return b, more, err
		}
		b, err := router.RecvBytes(flags)
		if err != nil {
			return nil, false, err
		}
		more, err := router.GetRcvmore()
		return b, more, err
	}
	id, more, err := recv(zmq4.DONTWAIT, false)
	if err != nil {
		return nil, nil, nil, err
	}
	// An envelope, the meta and one data frame over the limit are kept,
	// so that CheckData reports it, and the pieces of a split message;
	// frames beyond that are read and discarded.
	limit := transport.MaxDataFrames + 3
	for more {
		var f []byte
		f, more, err = recv(0, metaIndex(fs) >= 0)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(fs) == 0 && bytes.HasPrefix(f, ctlSplit) {
			limit += maxSplitPieces
		}
		if len(fs) < limit {
			fs = append(fs, f)
		}
	}
	var env *envelope
	if len(fs) > 0 && len(fs[0]) > 1 && fs[0][0] == 0 {
		switch {
		case bytes.HasPrefix(fs[0], ctlPacked) && len(fs) == 1:
			meta, data, err := unpack(fs[0])
			if err != nil {
				t.dropMalformed(id, nil, err)
				return id, nil, nil, nil
			}
			fs = append([][]byte{meta}, data...)
		case bytes.HasPrefix(fs[0], ctlSplit) && len(fs) > 1:
			split, err := decodeSplit(fs[0])
			if err == nil {
				var data [][]byte
				if data, err = joinSplit(split, fs[2:]); err == nil {
					fs = append(fs[1:2:2], data...)
				}
			}
			if err != nil {
				t.dropMalformed(id, nil, err)
				return id, nil, nil, nil
			}
		case bytes.Equal(fs[0], ctlHello) && len(fs) == 1:
			t.answerHello(router, id)
			return id, nil, nil, nil
		case bytes.HasPrefix(fs[0], ctlEnvelope) && t.sealedPort != 0:
			e, err := decodeEnvelope(fs[0])
			if err != nil {
				t.dropMalformed(id, nil, err)
				return id, nil, nil, nil
			}
			env, fs = &e, fs[1:]
		default:
			t.dropMalformed(id, nil, errors.New("a transport frame of another kind"))
			return id, nil, nil, nil
		}
	}
	if len(fs) == 0 {
		t.dropMalformed(id, nil, errors.New("no meta frame"))
		return id, nil, nil, nil
	}
	mm, err := transport.DecodeMeta(fs[0])
	if err != nil {
		t.dropMalformed(id, nil, err)
		return id, nil, nil, nil
	}
	data := fs[1:]
	if len(data) > transport.MaxDataFrames+1 {
		data = data[:transport.MaxDataFrames+1]
	}
	m := &transport.Message{Meta: mm, Data: data, WireSize: len(fs[0])}
	for _, d := range data {
		m.WireSize += len(d)
	}
	if env != nil {
		if last := env.frames[len(env.frames)-1].index; last >= len(data) {
			t.dropMalformed(id, &mm, fmt.Errorf("%w: sealed frame %d of a message of %d data frames", transport.ErrMalformed, last, len(data)))
			return id, nil, nil, nil
		}
		t.lendKept(m, kept)
		kept = nil
		return id, m, env, nil
	}
	if err := transport.CheckData(m); err != nil {
		t.dropMalformed(id, &mm, err)
		return id, nil, nil, nil
	}
	t.lendKept(m, kept)
	kept = nil
	return id, m, nil, nil
}

// metaIndex is the index of the meta frame among the frames fs read so
// far after the identity: 0, or 1 after an envelope; -1 while it is not
// read yet, or when the first frame is the transport's own.
func metaIndex(fs [][]byte) int {
	switch {
	case len(fs) == 0:
		return -1
	case len(fs[0]) > 1 && fs[0][0] == 0:
		if (bytes.HasPrefix(fs[0], ctlEnvelope) || bytes.HasPrefix(fs[0], ctlSplit)) && len(fs) > 1 {
			return 1
		}
		return -1
	}
	return 0
}

// lendKept lends m the frames kept in libzmq's memory that m's data
// frames are, closing those it is not (frames past the limit).
func (t *Transport) lendKept(m *transport.Message, kept []*cFrame) {
	if len(kept) == 0 {
		return
	}
	lent := make([][]byte, 0, len(kept))
	var frames []*cFrame
	for _, f := range kept {
		b := f.bytes()
		if slices.ContainsFunc(m.Data, func(d []byte) bool { return len(d) > 0 && &d[0] == &b[0] }) {
			lent = append(lent, b)
			frames = append(frames, f)
		} else {
			f.close()
		}
	}
	if len(frames) == 0 {
		return
	}
	t.borrowed.Add(uint64(len(frames)))
	t.borrowedOut.Add(int64(len(frames)))
	m.Lend(lent, func() {
		closeFrames(frames)
		t.borrowedOut.Add(-int64(len(frames)))
	})
}

// answerHello tells the peer of connection id that packed messages are
// read here, and where the sealed route is, when there is one (port 0
// otherwise). The answer goes back on the peer's DEALER; if it cannot go
// now, the peer sends unpacked messages and large frames through CURVE.
func (t *Transport) answerHello(router *zmq4.Socket, id []byte) {
	ans := routeAnswer(uint16(t.advertiseSealed.Load()))
	if _, err := router.SendBytes(id, zmq4.SNDMORE|zmq4.DONTWAIT); err != nil {
		return
	}
	_, _ = router.SendBytes(ans, zmq4.DONTWAIT)
}

// dropMalformed counts and logs a message dropped: malformed, or lost
// with its sealed frames (errSealedLost), which Stats counts apart.
func (t *Transport) dropMalformed(id []byte, m *transport.Meta, err error) {
	what := "dropped malformed message"
	if errors.Is(err, errSealedLost) {
		t.lost.Add(1)
		what = "dropped a message"
	} else {
		t.malformed.Add(1)
	}
	if !t.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		return
	}
	fields := logrus.Fields{"peer": hex.EncodeToString(id)}
	if m != nil {
		fields["sender"] = m.Sender
	}
	t.log.WithError(err).WithFields(fields).Debug(what)
}

// Recv implements transport.Transport. The data frames of the message are
// the receive buffers themselves.
func (t *Transport) Recv(ctx context.Context) (*transport.Message, error) {
	select {
	case <-t.done:
		return nil, transport.ErrClosed
	default:
	}
	select {
	case m := <-t.inbox:
		return m, nil
	case <-t.done:
		return nil, transport.ErrClosed
	case <-t.recvDead:
		return nil, t.recvErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Connect implements transport.Transport. It opens a DEALER socket to addr
// ("host:port", "tcp://…" or "ipc://…"; see the package documentation)
// and replaces the route to id, closing the socket of the old route and
// discarding what was still queued on it. ZeroMQ connects in the
// background and reconnects after failures, so Connect does not wait for
// the peer.
func (t *Transport) Connect(ctx context.Context, id int32, addr string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	endpoint, err := t.endpoint(addr)
	if err != nil {
		return fmt.Errorf("zmq: connect to %d at %q: %w", id, addr, err)
	}
	if !t.begin() {
		return transport.ErrClosed
	}
	defer t.ops.Done()
	p := &peer{
		t:        t,
		id:       id,
		endpoint: endpoint,
		sem:      make(chan struct{}, 1),
		gone:     make(chan struct{}),
	}
	if err := p.open(); err != nil {
		return fmt.Errorf("zmq: connect to %d at %q: %w", id, addr, err)
	}
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		p.close(0)
		return transport.ErrClosed
	}
	old := t.peers[id]
	t.peers[id] = p
	t.mu.Unlock()
	if old != nil {
		old.close(0)
	}
	return nil
}

// Disconnect implements transport.Transport. Messages still queued for id
// are discarded.
func (t *Transport) Disconnect(id int32) error {
	if !t.begin() {
		return transport.ErrClosed
	}
	defer t.ops.Done() // Close terminates the context only once p is closed
	t.mu.Lock()
	p := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if p != nil {
		p.close(0)
	}
	return nil
}

// maxPooledMeta is the largest meta buffer kept for reuse.
const maxPooledMeta = 64 << 10

var metaPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 256)
	return &b
}}

// Send implements transport.Transport. It queues m on the DEALER socket
// of m.Meta.Recver; when the queue is at its high-water mark, Send waits
// for room until ctx is done. It refuses a message that would fail
// transport.CheckData. m may be reused once Send returns: small frames
// are copied into ZeroMQ's buffers, and data frames of 64 KiB or more are
// sent from m's memory without a copy, Send returning once ZeroMQ has
// written them to the connection. If ctx ends before that, the socket is
// closed with what it still queued (the route reconnects for the next
// Send) and Send returns ctx's error; if the connection breaks and does
// not come back within a second, the message is lost with it and Send
// returns nil, as for a message ZeroMQ was writing when its connection
// broke.
func (t *Transport) Send(ctx context.Context, m *transport.Message) (int, error) {
	select {
	case <-t.done:
		return 0, transport.ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	id := m.Meta.Recver
	if err := transport.CheckData(m); err != nil {
		return 0, fmt.Errorf("zmq: send to %d: %w", id, err)
	}
	bp := metaPool.Get().(*[]byte)
	meta, err := transport.AppendMeta((*bp)[:0], &m.Meta)
	defer func() {
		// ZeroMQ has copied the meta by now. A buffer grown for a large
		// node table is left to the garbage collector.
		if cap(meta) <= maxPooledMeta {
			*bp = meta[:0]
			metaPool.Put(bp)
		}
	}()
	if err != nil {
		return 0, fmt.Errorf("zmq: send to %d: %w", id, err)
	}
	for {
		t.mu.Lock()
		closing, p := t.closing, t.peers[id]
		t.mu.Unlock()
		switch {
		case closing:
			return 0, transport.ErrClosed
		case p == nil:
			return 0, fmt.Errorf("zmq: send to %d: %w", id, transport.ErrUnknownPeer)
		}
		err := p.send(ctx, meta, m.Data)
		if errors.Is(err, errRouteGone) {
			continue // replaced or removed meanwhile: look again
		}
		if err != nil {
			return 0, fmt.Errorf("zmq: send to %d: %w", id, err)
		}
		t.sent.Add(1)
		awake.Touch()
		return len(meta) + m.DataBytes(), nil
	}
}

// Down implements transport.ConnWatcher. It reads the route's pending
// connection events unless a Send holds the socket, in which case what
// that Send read last stands.
func (t *Transport) Down(id int32) (time.Time, bool) {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p == nil {
		return time.Time{}, false
	}
	select {
	case p.sem <- struct{}{}:
		if p.sock != nil {
			p.connected()
		}
		<-p.sem
	default:
	}
	if ns := p.downSince.Load(); ns != 0 {
		return time.Unix(0, ns), true
	}
	return time.Time{}, false
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	return Stats{
		Sent: t.sent.Load(), Received: t.received.Load(), Malformed: t.malformed.Load(), Lent: t.lent.Load(),
		Sealed: t.sealed.Load(), Lost: t.lost.Load(), Packed: t.packed.Load(), Borrowed: t.borrowed.Load(),
		Refused: t.refused.Load(),
	}
}

// Close implements transport.Transport. In order, it: refuses new calls
// and wakes blocked ones; waits for Listen and Connect calls in progress;
// wakes the receive loop and waits for it to close the ROUTER; closes
// every DEALER once the Send using it (if any) has noticed, within
// pollInterval; and terminates the ZeroMQ context. All sockets have
// ZMQ_LINGER 0, so queued messages are discarded and nothing waits for a
// peer. A second Close waits for the first and returns nil.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		<-t.closed
		return nil
	}
	t.closing = true
	close(t.done)
	t.mu.Unlock()

	t.ops.Wait()
	// Nothing changes the fields below once closing is set and the
	// operations in progress are done.
	t.mu.Lock()
	peers, wakes, lock := t.peers, []*zmq4.Socket{t.wake, t.zapWake}, t.ipcLock
	t.peers, t.wake, t.zapWake, t.ipcLock = nil, nil, nil, nil
	t.mu.Unlock()

	for _, w := range wakes {
		if w != nil {
			// This fails (EAGAIN) when the loop has seen done by itself
			// and closed its end already; had it failed otherwise, the
			// loop would still see done within recvBackstop.
			_, _ = w.SendBytes(nil, zmq4.DONTWAIT)
		}
	}
	t.wg.Wait()
	for _, w := range wakes {
		if w != nil {
			_ = w.Close()
		}
	}
	// What nobody received gives back what it was lent.
	for drained := false; !drained; {
		select {
		case m := <-t.inbox:
			m.Release()
		default:
			drained = true
		}
	}
	linger := time.Duration(t.linger.Load())
	for _, p := range peers {
		p.close(linger)
	}
	err := t.zctx.Term()
	if lock != nil {
		lock.release()
	}
	close(t.closed)
	if err != nil {
		return fmt.Errorf("zmq: terminate context: %w", err)
	}
	return nil
}

// errRouteGone reports that a peer's route was replaced, removed or closed
// while a Send was using it.
var errRouteGone = errors.New("route gone")

// peer is the route to one node: a DEALER socket connected to the node's
// ROUTER. Whoever holds sem owns sock and poller.
type peer struct {
	t        *Transport
	id       int32
	endpoint string
	sem      chan struct{} // capacity 1: a mutex that a waiter can give up on
	gone     chan struct{} // closed when the route is replaced or removed

	sock   *zmq4.Socket   // nil once closed; guarded by sem
	raw    unsafe.Pointer // sock's libzmq socket, nil if unknown (rawSocket); guarded by sem
	poller *zmq4.Poller   // POLLOUT on sock; guarded by sem
	mon    *zmq4.Socket   // sock's connection events (see connected); guarded by sem
	live   bool           // sock has a connection, as of the last event read; guarded by sem
	// wasLive is whether sock had a connection before, as of the last
	// event read, and reask that it has another one now, whose peer send
	// asks again (ask); guarded by sem.
	wasLive, reask bool
	read           time.Time // when connected last read the events; guarded by sem

	// The sealed route (sealed.go): where the peer said it is (empty
	// until then, or when it has none), and its socket once opened;
	// guarded by sem.
	sealedEP   string
	sealed     *zmq4.Socket
	sealedRaw  unsafe.Pointer
	sealedPoll *zmq4.Poller // POLLOUT on sealed

	// Whether the peer answered ctlHello, which also says it reads packed
	// messages, and when send last looked for the answer; guarded by sem.
	answered bool
	looked   time.Time

	// downSince is when the route lost the connection it had (Unix
	// nanoseconds), 0 while it has one or before it first had one. It
	// outlives a socket dropped and opened again, and is written by
	// connected.
	downSince atomic.Int64
}

// A route's DEALER connects again after reconnectFirst, then twice as
// long after each failure, up to reconnectMax, libzmq's default interval:
// never later than before. With the default alone, a node that starts a
// moment before the scheduler binds its port (the tasks of a job start
// together) waited 100 ms to register, and many a job start took 100 to
// 200 ms longer (BENCHMARKS.md).
const (
	reconnectFirst = 10 * time.Millisecond
	reconnectMax   = 100 * time.Millisecond
)

// setReconnect sets s's reconnection intervals.
func setReconnect(s *zmq4.Socket) error {
	if err := s.SetReconnectIvl(reconnectFirst); err != nil {
		return fmt.Errorf("set ZMQ_RECONNECT_IVL: %w", err)
	}
	if err := s.SetReconnectIvlMax(reconnectMax); err != nil {
		return fmt.Errorf("set ZMQ_RECONNECT_IVL_MAX: %w", err)
	}
	return nil
}

// monitors numbers the inproc endpoints of the peers' event monitors.
var monitors atomic.Uint64

// open creates and connects the socket. The caller holds sem or is the
// only user of p.
func (p *peer) open() error {
	s, err := p.t.zctx.NewSocket(zmq4.DEALER)
	if err != nil {
		return fmt.Errorf("new DEALER socket: %w", err)
	}
	var mon *zmq4.Socket
	fail := func(err error) error {
		_ = s.Close()
		if mon != nil {
			_ = mon.Close()
		}
		return err
	}
	if err := s.SetLinger(0); err != nil {
		return fail(fmt.Errorf("set ZMQ_LINGER: %w", err))
	}
	if err := setReconnect(s); err != nil {
		return fail(err)
	}
	if err := p.t.secureClient(s); err != nil {
		return fail(err)
	}
	if err := p.t.boundFrames(s, maxAnswer); err != nil {
		return fail(err)
	}
	if wm := p.t.opts.WaterMark; wm > 0 {
		if err := s.SetSndhwm(wm); err != nil {
			return fail(fmt.Errorf("set ZMQ_SNDHWM: %w", err))
		}
	}
	if strings.HasPrefix(p.endpoint, "tcp://[") {
		if err := s.SetIpv6(true); err != nil {
			return fail(fmt.Errorf("set ZMQ_IPV6: %w", err))
		}
	}
	// Connection events, watched from before the connect so that none is
	// missed, tell send whether frames lent to ZeroMQ can be written.
	ep := "inproc://spindle-zmq-monitor-" + strconv.FormatUint(monitors.Add(1), 10)
	if err := s.Monitor(ep, zmq4.EVENT_CONNECTED|zmq4.EVENT_DISCONNECTED); err != nil {
		return fail(fmt.Errorf("monitor the DEALER socket: %w", err))
	}
	if mon, err = p.t.zctx.NewSocket(zmq4.PAIR); err != nil {
		return fail(fmt.Errorf("new PAIR socket: %w", err))
	}
	if err := mon.SetLinger(0); err != nil {
		return fail(fmt.Errorf("set ZMQ_LINGER: %w", err))
	}
	// libzmq sends events from its I/O thread with a blocking send: a
	// full queue of unread events would stall every connection of the
	// transport. No limit on this end keeps the queue from filling;
	// connected reads it at least every second while the route is used.
	if err := mon.SetRcvhwm(0); err != nil {
		return fail(fmt.Errorf("set ZMQ_RCVHWM: %w", err))
	}
	if err := mon.Connect(ep); err != nil {
		return fail(fmt.Errorf("connect %s: %w", ep, err))
	}
	if err := s.Connect(p.endpoint); err != nil {
		return fail(fmt.Errorf("connect %s: %w", p.endpoint, err))
	}
	p.sock, p.mon, p.live = s, mon, false
	p.raw = rawSocket(s, zmq4.DEALER)
	p.poller = zmq4.NewPoller()
	p.poller.Add(s, zmq4.POLLOUT)
	p.wasLive, p.reask = false, false
	// The first message on the connection; a full queue cannot refuse it
	// on a new socket.
	p.ask()
	return nil
}

// ask asks the peer whether it reads packed messages and where its sealed
// route is, forgetting what it said before. sem must be held.
func (p *peer) ask() {
	if p.raw == nil {
		return
	}
	p.dropSealed()
	p.sealedEP, p.answered, p.looked, p.reask = "", false, time.Time{}, false
	_, _ = p.sock.SendBytes(ctlHello, zmq4.DONTWAIT)
}

// close marks the route gone, waits for the Send using the socket to
// notice, and closes the socket. It is called once, by whoever removed p
// from the route table.
func (p *peer) close(linger time.Duration) {
	close(p.gone)
	p.sem <- struct{}{}
	if linger > 0 && p.sock != nil {
		_ = p.sock.SetLinger(linger)
	}
	p.drop()
	<-p.sem
}

// Drain implements transport.Drainer: Close then waits, at most linger,
// for what the routes hold to be sent.
func (t *Transport) Drain(linger time.Duration) { t.linger.Store(int64(linger)) }

// drop closes the socket, discarding what it queued. sem must be held.
func (p *peer) drop() {
	if p.sock != nil {
		// Monitoring stops first, at once: libzmq would block its I/O
		// thread sending an event to a monitor whose reader is gone, and
		// the socket itself closes in the background.
		_ = p.sock.Monitor("", 0)
		_ = p.sock.Close()
		_ = p.mon.Close()
		p.sock, p.raw, p.mon, p.live = nil, nil, nil, false
	}
	p.dropSealed()
}

// connected reads the socket's pending connection events and reports
// whether it has a connection to the peer. sem must be held.
func (p *peer) connected() bool {
	p.read = time.Now()
	for {
		ev, _, _, err := p.mon.RecvEvent(zmq4.DONTWAIT)
		if err != nil {
			return p.live // EAGAIN: no news
		}
		switch ev {
		case zmq4.EVENT_CONNECTED:
			if p.wasLive {
				// Another process may listen at the address now: ask it
				// again what it reads and where its sealed route is, once
				// no message is half sent.
				p.reask = true
			}
			p.live, p.wasLive = true, true
			p.downSince.Store(0)
		case zmq4.EVENT_DISCONNECTED:
			if p.live {
				p.downSince.Store(time.Now().UnixNano())
			}
			p.live = false
		}
	}
}

// send writes one message to the socket: meta, then the data frames, each
// but the last with ZMQ_SNDMORE; with CURVE, a split frame first when a
// data frame is over maxFrame, which then goes in pieces (split.go). ZeroMQ accepts or refuses a whole message
// at its first frame (the high-water mark counts messages), so only the
// first frame waits for room, and that wait gives up when ctx is done.
// While the socket is connected, data frames of minBorrowed bytes or more
// are lent to ZeroMQ rather than copied, and send waits for them to come
// back (see returned). Without a connection they are copied and queued,
// as small frames are, for ZeroMQ to deliver once it connects.
func (p *peer) send(ctx context.Context, meta []byte, data [][]byte) error {
	select {
	case p.sem <- struct{}{}:
	case <-p.gone:
		return errRouteGone
	case <-p.t.done:
		return transport.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sem }()
	select {
	case <-p.gone:
		return errRouteGone
	default:
	}
	if p.sock == nil {
		// A previous send failed part-way and closed the socket.
		if err := p.open(); err != nil {
			return err
		}
	}
	if time.Since(p.read) > time.Second {
		p.connected() // keep the queue of events short, and see reconnections
	}
	if p.reask {
		p.ask()
	}
	if !p.answered && p.raw != nil {
		if now := time.Now(); now.Sub(p.looked) >= lookInterval {
			p.looked = now
			p.learnRoute()
		}
	}
	if p.answered && packable(meta, data) {
		bp := packPool.Get().(*[]byte)
		b := pack((*bp)[:0], meta, data)
		err := p.write(ctx, b, 0, nil)
		if cap(b) <= 2*packMax {
			*bp = b[:0]
			packPool.Put(bp)
		}
		if err == nil {
			p.t.packed.Add(1)
		}
		return err
	}
	if p.t.sealedOn() && p.raw != nil && hasLarge(data) {
		if done, err := p.sendSealed(ctx, meta, data); done || err != nil {
			return err
		}
	}
	// A started message must be finished: from its first frame on only
	// Close or a replaced route stops the wait, never ctx.
	rest := context.WithoutCancel(ctx)
	started := false
	if p.t.opts.Curve != nil {
		split, pieces, err := splitData(data, maxFrame)
		if err != nil {
			return err
		}
		if split != nil {
			if err := p.write(ctx, split, zmq4.SNDMORE, nil); err != nil {
				return err
			}
			data, started = pieces, true
		}
	}
	more, metaCtx := zmq4.Flag(0), ctx
	if len(data) > 0 {
		more = zmq4.SNDMORE
	}
	if started {
		metaCtx = rest
	}
	if err := p.write(metaCtx, meta, more, nil); err != nil {
		if started {
			p.drop() // it holds part of a message
		}
		return err
	}
	var lent *borrowed
	lend := p.raw != nil && hasLarge(data) && p.connected()
	for i, d := range data {
		flags := zmq4.SNDMORE
		if i == len(data)-1 {
			flags = 0
		}
		var r *borrowed
		if lend && len(d) >= minBorrowed {
			if lent == nil {
				lent = newBorrowed()
			}
			r = lent
			p.t.lent.Add(1)
		}
		if err := p.write(rest, d, flags, r); err != nil {
			// The socket holds part of a message, which would run into
			// the next one: drop it with the socket.
			p.drop()
			if lent != nil {
				lent.release()
				p.awaitRelease(lent)
			}
			return err
		}
	}
	if lent != nil {
		return p.returned(ctx, lent)
	}
	return nil
}

// returned waits for ZeroMQ to hand back the frames lent to it, which it
// does once it has written them to the connection. A connection that
// breaks is given reconnectGrace to come back (ZeroMQ reconnects by
// itself, and writes the message then). Otherwise the message may sit in
// the socket's queue for as long as the peer does not read, so the wait
// ends early, the socket dropped with its queue (which hands the frames
// back; the route reconnects for the next send):
//
//   - when the connection stays lost, or the route is replaced: send
//     succeeds, the message lost with the connection as ZeroMQ loses the
//     message it was writing when a connection breaks (a successful Send
//     never meant delivery: the node layer finds dead peers, and resends
//     when acknowledged delivery is on);
//   - when ctx ends or the transport closes: send fails with that error.
//
// sem must be held.
func (p *peer) returned(ctx context.Context, lent *borrowed) error {
	lent.release() // the sender's own reference
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var (
		err    error
		lostAt time.Time // when the connection was found broken; zero while it is up
	)
wait:
	for {
		select {
		case <-lent.done:
			return nil
		case now := <-tick.C:
			switch {
			case p.connected():
				lostAt = time.Time{}
			case lostAt.IsZero():
				lostAt = now
			case now.Sub(lostAt) >= reconnectGrace:
				p.t.log.WithField("peer", p.id).Debugf("zmq: connection lost for %v while a message waited to be written; it is dropped", reconnectGrace)
				break wait
			}
		case <-p.gone:
			break wait
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-p.t.done:
			err = transport.ErrClosed
			break wait
		}
	}
	p.drop()
	p.awaitRelease(lent)
	return err
}

// awaitRelease waits for the frames lent to a dropped socket, and logs if
// libzmq holds on to them past releaseBackstop.
func (p *peer) awaitRelease(lent *borrowed) {
	if !lent.awaitRelease() {
		p.t.log.WithField("peer", p.id).Errorf("zmq: frames of a dropped socket not released after %v; their memory stays pinned", releaseBackstop)
	}
}

// write sends one frame without blocking, waiting on the socket for room
// while ZeroMQ says EAGAIN. With lent set the frame is lent to ZeroMQ
// rather than copied (sendBorrowed). sem must be held.
func (p *peer) write(ctx context.Context, b []byte, flags zmq4.Flag, lent *borrowed) error {
	for {
		var err error
		if lent != nil {
			err = sendBorrowed(p.raw, b, flags|zmq4.DONTWAIT, lent)
		} else {
			_, err = p.sock.SendBytes(b, flags|zmq4.DONTWAIT)
		}
		if err == nil {
			return nil
		}
		if !isErrno(err, syscall.EAGAIN) {
			return err
		}
		if err := p.waitWritable(ctx); err != nil {
			return err
		}
	}
}

// waitWritable waits until the socket has room for a message, ctx is done,
// the route is gone or the transport closes. sem must be held.
func (p *peer) waitWritable(ctx context.Context) error {
	for {
		select {
		case <-p.gone:
			return errRouteGone
		case <-p.t.done:
			return transport.ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		wait := pollInterval
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				return context.DeadlineExceeded
			}
			wait = min(wait, left)
		}
		polled, err := p.poller.Poll(wait)
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if len(polled) > 0 {
			return nil
		}
	}
}

// isErrno reports whether err is the ZeroMQ error number e.
func isErrno(err error, e syscall.Errno) bool {
	var zerr zmq4.Errno
	return errors.As(err, &zerr) && zerr == zmq4.Errno(e)
}

// hasLarge reports whether a data frame is large enough to be lent.
func hasLarge(data [][]byte) bool {
	for _, d := range data {
		if len(d) >= minBorrowed {
			return true
		}
	}
	return false
}
