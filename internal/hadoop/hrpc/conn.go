// Package hrpc is a client for Hadoop's IPC protocol, version 9, with
// protobuf RPC (ProtobufRpcEngine2), SIMPLE, TOKEN (SASL DIGEST-MD5) and
// KERBEROS (SASL GSSAPI) authentication, and many calls in flight on one
// connection. SASL's quality of protection is "auth" (Hadoop's
// hadoop.rpc.protection=authentication, its default): nothing is wrapped
// after the handshake, and a server that insists on integrity or privacy
// is refused with an error that says so.
//
// # Wire
//
// The client opens with the 7-byte preamble
//
//	"hrpc" 0x09 0x00 <auth: 0x00 NONE | 0xDF SASL>
//
// then, for TOKEN and KERBEROS auth, the SASL exchange (call id -33), then the
// IpcConnectionContextProto (call id -3, no reply), then calls with call
// ids 0, 1, 2, … Each call's frame is RpcRequestHeaderProto +
// RequestHeaderProto + request; each response frame is
// RpcResponseHeaderProto + response (SUCCESS only). Responses may come
// back in any order and are matched by call id.
//
// # Concurrency
//
// A Conn is safe for concurrent use. One reader goroutine owns the read
// side and hands responses to waiting calls; writes are serialised by a
// mutex that is never held while reading.
package hrpc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	"github.com/spindle-ps/spindle/internal/hadoop/sasl"
)

// Auth is an authentication method.
type Auth int

const (
	// AuthSimple sends the user name unauthenticated (auth protocol NONE).
	AuthSimple Auth = iota
	// AuthToken authenticates with a Hadoop token over SASL DIGEST-MD5.
	AuthToken
	// AuthKerberos authenticates with a Kerberos service ticket over SASL
	// GSSAPI.
	AuthKerberos
)

// DefaultMaxFrame is the default Options.MaxFrame: 128 MiB, Hadoop's
// ipc.maximum.data.length default.
const DefaultMaxFrame = 128 << 20

// DefaultDialTimeout is the default Options.DialTimeout.
const DefaultDialTimeout = 20 * time.Second

// Options configure a connection.
type Options struct {
	// Protocol is the RPC protocol, sent in the connection context and in
	// every call's RequestHeaderProto.declaringClassProtocolName, e.g.
	// "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB". Required.
	Protocol string
	// ProtocolVersion is clientProtocolVersion; 0 means 1 (all YARN
	// protocols are version 1).
	ProtocolVersion uint64
	// User is the effective user for AuthSimple. It is not sent with
	// AuthToken (the token names the user) nor with AuthKerberos (the
	// ticket does).
	User string
	// Auth is the authentication method; the zero value is AuthSimple.
	Auth Auth
	// TokenIdentifier and TokenPassword are the token's identifier and
	// password bytes for AuthToken.
	TokenIdentifier, TokenPassword []byte
	// Kerberos is the logged-in client for AuthKerberos.
	Kerberos *krbclient.Client
	// ServicePrincipal is the server's principal for AuthKerberos, without
	// its realm and with _HOST already resolved ("rm/rm1.example.com"; see
	// package kerberos). The server must offer exactly this principal.
	ServicePrincipal string
	// Protection lists the protections this client accepts for AuthToken
	// and AuthKerberos, in order of preference: ProtectAuthentication,
	// ProtectIntegrity, ProtectPrivacy (hadoop.rpc.protection). Empty
	// takes the strongest the server offers.
	Protection []string
	// ClientID identifies this client to the server's retry cache; zero
	// means a random one.
	ClientID [16]byte
	// MaxFrame bounds the size of a frame in either direction, in bytes;
	// 0 means DefaultMaxFrame.
	MaxFrame int
	// DialTimeout bounds connecting and the handshake when ctx has an
	// earlier or no deadline; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// Rand is the source of the client id and the SASL client nonce; nil
	// means crypto/rand. Tests set it for reproducible bytes.
	Rand io.Reader
}

// Conn is a connection to one Hadoop RPC server for one protocol.
type Conn struct {
	nc       net.Conn
	opts     Options
	clientID []byte

	wmu sync.Mutex // serialises writes; never held while reading

	mu      sync.Mutex // guards the fields below
	nextID  int32
	pending map[int32]*call
	err     error // set once the connection is unusable

	done       chan struct{} // closed when the connection is shut down
	readerDone chan struct{}
	closeOnce  sync.Once
}

type call struct {
	method string
	resp   proto.Message
	done   chan error // buffered; receives exactly one result
}

// Dial connects to addr (host:port), performs the handshake and returns
// a connection ready for calls.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	opts = withDefaults(opts)
	dctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hrpc: dial %s: %w", addr, err)
	}
	c, err := NewConn(dctx, nc, opts)
	if err != nil {
		return nil, fmt.Errorf("hrpc: handshake with %s: %w", addr, err)
	}
	return c, nil
}

func withDefaults(o Options) Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ProtocolVersion == 0 {
		o.ProtocolVersion = 1
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	return o
}

// NewConn performs the handshake on an established connection, which it
// takes ownership of (it is closed on failure and by Close).
func NewConn(ctx context.Context, nc net.Conn, opts Options) (*Conn, error) {
	opts = withDefaults(opts)
	if opts.Protocol == "" {
		nc.Close()
		return nil, errors.New("hrpc: Options.Protocol is empty")
	}
	c := &Conn{
		nc:         nc,
		opts:       opts,
		pending:    map[int32]*call{},
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.clientID = opts.ClientID[:]
	if opts.ClientID == ([16]byte{}) {
		c.clientID = make([]byte, 16)
		if _, err := io.ReadFull(opts.Rand, c.clientID); err != nil {
			nc.Close()
			return nil, fmt.Errorf("hrpc: client id: %w", err)
		}
	}
	finish := startHandshake(ctx, nc, opts.DialTimeout)
	if err := finish(c.handshake()); err != nil {
		nc.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

// startHandshake bounds I/O on nc by ctx and by timeout (DialTimeout),
// whichever ends first, and makes cancelling ctx interrupt blocked I/O.
// The returned finish takes the handshake's result, clears nc's
// deadline and returns the error to report: ctx's error if ctx ended,
// one wrapping os.ErrDeadlineExceeded and naming timeout if that passed
// first. (The owner of nc may also interrupt the handshake by setting a
// past deadline on it: its timeout error is then returned as it is.)
func startHandshake(ctx context.Context, nc net.Conn, timeout time.Duration) (finish func(error) error) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	end, _ := hctx.Deadline()
	stop := deadlineFromContext(hctx, nc)
	return func(err error) error {
		interrupted := !stop()
		cancel()
		nc.SetDeadline(time.Time{})
		switch {
		case err == nil && !interrupted:
			return nil
		case err != nil && !isTimeout(err):
			return err // the handshake's own failure
		}
		// The handshake timed out, or got through as hctx ended: then the
		// past deadline that hctx's end sets may land after the clearing
		// above, and the connection cannot be trusted.
		if cerr := contextEnded(ctx); cerr != nil {
			return cerr
		}
		if err != nil && time.Now().Before(end) {
			return err // a deadline set on nc by someone else
		}
		if err == nil {
			err = os.ErrDeadlineExceeded
		}
		return fmt.Errorf("no answer within %v: %w", timeout, err)
	}
}

// contextEnded returns ctx's error, or context.DeadlineExceeded once its
// deadline has passed even if ctx does not say so yet (a connection's
// deadline may fire before the context's timer).
func contextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// deadlineFromContext applies ctx's deadline to nc and arranges for
// cancellation to interrupt blocked I/O. The returned stop function
// reports false if ctx was cancelled meanwhile.
func deadlineFromContext(ctx context.Context, nc net.Conn) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	return context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func requestHeader(callID int32, clientID []byte) *pb.RpcRequestHeaderProto {
	return &pb.RpcRequestHeaderProto{
		RpcKind:    pb.RpcKindProto_RPC_PROTOCOL_BUFFER.Enum(),
		RpcOp:      pb.RpcRequestHeaderProto_RPC_FINAL_PACKET.Enum(),
		CallId:     proto.Int32(callID),
		ClientId:   clientID,
		RetryCount: proto.Int32(-1),
	}
}

// handshake writes the preamble, runs SASL if needed and sends the
// connection context. It runs before the reader goroutine starts.
func (c *Conn) handshake() error {
	user, err := c.authenticate()
	if err != nil {
		return err
	}
	var preamble []byte
	if c.opts.Auth == AuthSimple {
		preamble = simplePreamble // written with the context, in one frame
	}
	ctxPkt, err := packet(requestHeader(connContextCallID, c.clientID),
		&pb.IpcConnectionContextProto{UserInfo: user, Protocol: proto.String(c.opts.Protocol)})
	if err != nil {
		return err
	}
	_, err = c.nc.Write(append(preamble, ctxPkt...))
	return err
}

var (
	simplePreamble = []byte{'h', 'r', 'p', 'c', 9, 0, 0x00}
	saslPreamble   = []byte{'h', 'r', 'p', 'c', 9, 0, 0xDF}
)

// authenticate writes the preamble and runs the SASL exchange for
// AuthToken and AuthKerberos (for AuthSimple it writes nothing). It
// returns the user the connection context must name.
func (c *Conn) authenticate() (*pb.UserInformationProto, error) {
	user := &pb.UserInformationProto{}
	if c.opts.Auth == AuthSimple {
		user.EffectiveUser = proto.String(c.opts.User)
		return user, nil
	}
	if _, err := c.nc.Write(saslPreamble); err != nil {
		return nil, err
	}
	if c.opts.Auth == AuthKerberos {
		name, err := c.saslKerberos()
		if err != nil {
			return nil, err
		}
		user.EffectiveUser = proto.String(name)
		return user, nil
	}
	simple, err := c.saslToken()
	if err != nil {
		return nil, err
	}
	if simple {
		user.EffectiveUser = proto.String(c.opts.User)
	}
	return user, nil
}

// Authenticate runs the start of a connection on nc, the preamble and
// the SASL exchange of opts.Auth (AuthToken or AuthKerberos), and stops
// there, for a client library that speaks Hadoop IPC itself but cannot
// authenticate this way. It returns the connection the library must use:
// its own preamble is dropped (SkipPreamble), and with integrity or
// privacy its frames are wrapped and the server's unwrapped. ctx and
// opts.DialTimeout, whichever ends first, bound the exchange; nc is
// closed on failure, and the error names its remote address.
func Authenticate(ctx context.Context, nc net.Conn, opts Options) (net.Conn, error) {
	opts = withDefaults(opts)
	if opts.Auth == AuthSimple {
		nc.Close()
		return nil, errors.New("hrpc: Authenticate needs AuthToken or AuthKerberos")
	}
	c := &Conn{nc: nc, opts: opts}
	finish := startHandshake(ctx, nc, opts.DialTimeout)
	_, err := c.authenticate()
	if err = finish(err); err != nil {
		nc.Close()
		return nil, fmt.Errorf("hrpc: handshake with %s: %w", nc.RemoteAddr(), err)
	}
	return SkipPreamble(c.nc), nil
}

// SkipPreamble returns nc with its first 7 written bytes dropped: the
// preamble of a client library whose connection Authenticate has already
// opened. Those bytes must be a version 9 preamble.
func SkipPreamble(nc net.Conn) net.Conn { return &skipPreamble{Conn: nc} }

type skipPreamble struct {
	net.Conn
	seen int // preamble bytes dropped so far
}

func (s *skipPreamble) Write(b []byte) (int, error) {
	n := 0
	for s.seen < len(saslPreamble) && n < len(b) {
		if s.seen < 5 && b[n] != saslPreamble[s.seen] {
			return n, fmt.Errorf("hrpc: the client library began with %q, not a version 9 preamble", b[:n+1])
		}
		s.seen++
		n++
	}
	if n == len(b) {
		return n, nil
	}
	m, err := s.Conn.Write(b[n:])
	return n + m, err
}

// saslToken runs the TOKEN / DIGEST-MD5 exchange:
//
//	C: NEGOTIATE
//	S: NEGOTIATE auths=[{TOKEN, DIGEST-MD5, protocol "", serverId "default", challenge}, ...]
//	C: INITIATE token=<digest-response> auths=[<the chosen auth without challenge>]
//	S: SUCCESS token="rspauth=..."
//
// It reports simple=true when the server answered NEGOTIATE with SUCCESS
// (SASL not required: continue as SIMPLE).
func (c *Conn) saslToken() (simple bool, err error) {
	if c.opts.TokenIdentifier == nil || c.opts.TokenPassword == nil {
		return false, errors.New("hrpc: AuthToken without a token identifier and password")
	}
	auth, err := c.negotiate("TOKEN", "DIGEST-MD5")
	if err != nil || auth == nil {
		return auth == nil && err == nil, err
	}
	ch, err := sasl.ParseChallenge(auth.GetChallenge())
	if err != nil {
		return false, err
	}
	cnonce := make([]byte, 24)
	if _, err := io.ReadFull(c.opts.Rand, cnonce); err != nil {
		return false, err
	}
	d := sasl.Digest{
		Username:  base64.StdEncoding.EncodeToString(c.opts.TokenIdentifier),
		Password:  base64.StdEncoding.EncodeToString(c.opts.TokenPassword),
		DigestURI: auth.GetProtocol() + "/" + auth.GetServerId(),
		CNonce:    base64.StdEncoding.EncodeToString(cnonce),
	}
	resp, rspauth, layer, err := d.Respond(ch, digestQOPs(c.opts.Protection))
	if err != nil {
		return false, err
	}
	echo := proto.Clone(auth).(*pb.RpcSaslProto_SaslAuth)
	echo.Challenge = nil
	if err := c.writeSasl(&pb.RpcSaslProto{
		State: pb.RpcSaslProto_INITIATE.Enum(),
		Token: resp,
		Auths: []*pb.RpcSaslProto_SaslAuth{echo},
	}); err != nil {
		return false, err
	}
	fin, err := c.readSasl()
	if err != nil {
		return false, err
	}
	if fin.GetState() != pb.RpcSaslProto_SUCCESS {
		return false, fmt.Errorf("hrpc: sasl: unexpected %v after INITIATE", fin.GetState())
	}
	if err := sasl.VerifyRspAuth(fin.GetToken(), rspauth); err != nil {
		return false, err
	}
	if layer != nil {
		c.nc = &protected{Conn: c.nc, layer: layer, max: sasl.RawSendSize(layer), maxFrame: c.opts.MaxFrame}
	}
	return false, nil
}

// digestQOPs is DIGEST-MD5's name for each protection of want (empty:
// the strongest first).
func digestQOPs(want []string) []string {
	if len(want) == 0 {
		want = []string{ProtectPrivacy, ProtectIntegrity, ProtectAuthentication}
	}
	names := map[string]string{ProtectPrivacy: sasl.QOPPrivacy, ProtectIntegrity: sasl.QOPIntegrity, ProtectAuthentication: sasl.QOPAuth}
	var out []string
	for _, w := range want {
		if q, ok := names[w]; ok {
			out = append(out, q)
		}
	}
	return out
}

// negotiate sends NEGOTIATE and returns the server's offer of method and
// mechanism; nil, nil when the server needs no SASL (it answered
// SUCCESS).
func (c *Conn) negotiate(method, mechanism string) (*pb.RpcSaslProto_SaslAuth, error) {
	if err := c.writeSasl(&pb.RpcSaslProto{State: pb.RpcSaslProto_NEGOTIATE.Enum()}); err != nil {
		return nil, err
	}
	neg, err := c.readSasl()
	if err != nil {
		return nil, err
	}
	switch neg.GetState() {
	case pb.RpcSaslProto_SUCCESS:
		return nil, nil
	case pb.RpcSaslProto_NEGOTIATE:
	default:
		return nil, fmt.Errorf("hrpc: sasl: unexpected %v in reply to NEGOTIATE", neg.GetState())
	}
	var methods []string
	for _, a := range neg.GetAuths() {
		if a.GetMethod() == method && a.GetMechanism() == mechanism {
			return a, nil
		}
		methods = append(methods, a.GetMethod()+"/"+a.GetMechanism())
	}
	return nil, fmt.Errorf("hrpc: sasl: server does not offer %s/%s (offers %v)", method, mechanism, methods)
}

func (c *Conn) writeSasl(m *pb.RpcSaslProto) error {
	p, err := packet(requestHeader(saslCallID, []byte{}), m)
	if err != nil {
		return err
	}
	_, err = c.nc.Write(p)
	return err
}

func (c *Conn) readSasl() (*pb.RpcSaslProto, error) {
	r, err := readResponse(c.nc, c.opts.MaxFrame)
	if err != nil {
		return nil, err
	}
	if r.header.GetStatus() != pb.RpcResponseHeaderProto_SUCCESS {
		return nil, remoteError("", r.header)
	}
	if id := r.callID(); id != saslCallID {
		return nil, fmt.Errorf("hrpc: sasl: reply with call id %d", id)
	}
	m := &pb.RpcSaslProto{}
	if err := proto.Unmarshal(r.body, m); err != nil {
		return nil, fmt.Errorf("hrpc: sasl: %w", err)
	}
	return m, nil
}

// Call invokes method with req and decodes the reply into resp. It
// returns a *RemoteError for an error the server reports, ctx.Err() when
// ctx ends first (the call is abandoned; a late reply is discarded and the
// connection stays usable), and the connection's error once it has
// failed. A write interrupted by ctx fails the connection, since a partial
// frame cannot be taken back.
func (c *Conn) Call(ctx context.Context, method string, req, resp proto.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cl := &call{method: method, resp: resp, done: make(chan error, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	id := c.nextID
	c.nextID = (c.nextID + 1) & 0x7fffffff
	c.pending[id] = cl
	c.mu.Unlock()

	p, err := packet(requestHeader(id, c.clientID), &pb.RequestHeaderProto{
		MethodName:                 proto.String(method),
		DeclaringClassProtocolName: proto.String(c.opts.Protocol),
		ClientProtocolVersion:      proto.Uint64(c.opts.ProtocolVersion),
	}, req)
	if err == nil && len(p)-4 > c.opts.MaxFrame {
		err = fmt.Errorf("%w: request of %d bytes, limit %d", ErrFrameTooLarge, len(p)-4, c.opts.MaxFrame)
	}
	if err != nil {
		c.forget(id)
		return fmt.Errorf("hrpc: %s: %w", method, err)
	}
	if err := c.write(ctx, p); err != nil {
		c.forget(id)
		return err
	}
	select {
	case err := <-cl.done:
		return err
	case <-ctx.Done():
		c.forget(id)
		select { // the reply may have raced with ctx
		case err := <-cl.done:
			return err
		default:
		}
		return ctx.Err()
	}
}

func (c *Conn) forget(id int32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// write sends one frame, honouring ctx. A failed write fails the connection.
func (c *Conn) write(ctx context.Context, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.failure()
	default:
	}
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := c.nc.Write(p)
	cancelled := !stop()
	c.nc.SetWriteDeadline(time.Time{})
	if err != nil {
		if cancelled || ctx.Err() != nil {
			err = ctx.Err()
			c.fail(fmt.Errorf("hrpc: write: %w", err))
			return err
		}
		c.fail(fmt.Errorf("hrpc: write: %w", err))
		return c.failure() // the reader's error, if it saw the failure first
	}
	return nil
}

// readLoop is the connection's only reader; it exits when the connection
// fails or is closed.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	for {
		r, err := readResponse(c.nc, c.opts.MaxFrame)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			c.fail(fmt.Errorf("hrpc: read: %w", err))
			return
		}
		id := r.callID()
		if id == pingCallID {
			continue
		}
		c.mu.Lock()
		cl := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		switch r.header.GetStatus() {
		case pb.RpcResponseHeaderProto_SUCCESS:
			if cl == nil {
				continue // abandoned call
			}
			if err := proto.Unmarshal(r.body, cl.resp); err != nil {
				cl.done <- fmt.Errorf("hrpc: %s: decode response: %w", cl.method, err)
			} else {
				cl.done <- nil
			}
		case pb.RpcResponseHeaderProto_ERROR:
			if cl != nil {
				cl.done <- remoteError(cl.method, r.header)
			}
		default: // FATAL: the server closes the connection
			method := ""
			if cl != nil {
				method = cl.method
			}
			rerr := remoteError(method, r.header)
			c.fail(rerr) // before waking the caller, so a next call sees it
			if cl != nil {
				cl.done <- rerr
			}
			return
		}
	}
}

// fail marks the connection unusable with err (the first error wins),
// fails every pending call and closes the socket.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pend := c.pending
	c.pending = map[int32]*call{}
	c.mu.Unlock()
	for _, cl := range pend {
		cl.done <- c.failure()
	}
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}

func (c *Conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Err returns the error that made the connection unusable, or nil.
func (c *Conn) Err() error { return c.failure() }

// Close closes the connection, fails calls in flight with ErrClosed and
// waits for the reader goroutine. It is idempotent and always returns nil.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.readerDone
	return nil
}
