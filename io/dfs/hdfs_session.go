package dfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// namenodeProtocol is the NameNode's client protocol, as Hadoop IPC names it.
const namenodeProtocol = "org.apache.hadoop.hdfs.protocol.ClientProtocol"

// session is one hdfs.Client (one NameNode connection) and the
// bookkeeping that lets a context interrupt its calls.
type session struct {
	h      *HDFS
	client *hdfs.Client
	// sem holds the one NameNode call this package lets run at a time,
	// so that waiting for it can be cancelled (the client serialises its
	// calls behind a mutex of its own).
	sem chan struct{}
	// conn is the current NameNode connection, set by dialNamenode.
	conn atomic.Pointer[net.Conn]
	// dialCtx, when set, is the context of the operation that may dial.
	dialCtx atomic.Pointer[context.Context]
	// lastDialErr is the last NameNode dial failure, for error messages.
	lastDialErr atomic.Pointer[error]
	// aborts counts calls of abort.
	aborts  atomic.Uint64
	broken  atomic.Bool
	closing atomic.Bool
	// retireAt, when set, is when new operations stop being given the
	// session (see dataKeyRetirement).
	retireAt time.Time

	refs int // operations and open files using it; guarded by h.mu
}

// abort makes the NameNode call in flight fail now, and marks the session
// broken so that new operations open a new one.
func (s *session) abort() {
	s.broken.Store(true)
	s.aborts.Add(1)
	if c := s.conn.Load(); c != nil {
		(*c).SetDeadline(time.Unix(1, 0))
	}
}

func (s *session) close() error {
	s.closing.Store(true)
	s.abort() // end a lease renewal in flight, so that Close gets the client's lock
	err := s.client.Close()
	if err != nil && !isNetClosed(err) {
		return err
	}
	return nil
}

func isNetClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

func (s *session) dialNamenode(libCtx context.Context, network, addr string) (net.Conn, error) {
	if s.closing.Load() {
		return nil, ErrClosed
	}
	ctx := libCtx // the client passes context.Background
	if p := s.dialCtx.Load(); p != nil {
		ctx = *p
	}
	d := net.Dialer{Timeout: s.h.opts.DialTimeout, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		s.lastDialErr.Store(&err)
		return nil, err
	}
	// Published before any handshake, so that abort (a context ended, a
	// timeout, close) interrupts one too: the client re-dials with
	// context.Background, holding its lock, when a file's Read or Write
	// or a lease renewal finds the connection lost.
	aborts := s.aborts.Load()
	s.conn.Store(&c)
	if t := s.h.token.Load(); s.h.opts.Kerberos && t != nil {
		// The client cannot authenticate with a token: do it for it, and
		// hand it a connection that has passed the SASL exchange. ctx and
		// DialTimeout bound the exchange.
		ac, err := hrpc.Authenticate(ctx, c, hrpc.Options{
			Protocol: namenodeProtocol, Auth: hrpc.AuthToken,
			TokenIdentifier: t.Identifier, TokenPassword: t.Password,
			DialTimeout: s.h.opts.DialTimeout, Protection: s.h.opts.Protection,
		})
		if err != nil {
			err = fmt.Errorf("delegation token of %s: %w", t.Service, err)
			s.lastDialErr.Store(&err)
			return nil, err
		}
		c = ac
		s.conn.Store(&c)
		if s.aborts.Load() != aborts {
			// An abort during the exchange may have set its deadline
			// before Authenticate cleared it.
			c.SetDeadline(time.Unix(1, 0))
		}
	}
	return c, nil
}

func (s *session) dialDatanode(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.closing.Load() {
		return nil, ErrClosed
	}
	d := net.Dialer{Timeout: s.h.opts.DialTimeout, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	// The client dials with context.Background and, before it applies the
	// deadline a Read gave it, writes its request and waits for the
	// DataNode's answer (and, with DataTransferProtection, runs a SASL
	// exchange first, for writes too), so nothing else bounds that wait:
	// a DataNode that accepts and never answers would hang the caller.
	// This deadline bounds it until the client's own SetDeadline replaces
	// it. A negative IOTimeout asks for no bound.
	if t := s.h.opts.IOTimeout; t > 0 {
		if err := c.SetDeadline(time.Now().Add(t)); err != nil {
			c.Close()
			return nil, err
		}
	}
	if s.h.saslQOPs != nil {
		wrapped, err := s.h.datanodeSASL(c, addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		c = wrapped
	}
	return c, nil
}

// acquire returns the session for a new operation, dialling one if
// needed, with a reference the caller must give back with release.
func (h *HDFS) acquire(ctx context.Context) (*session, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, ErrClosed
		}
		if s := h.sess; s != nil && !s.broken.Load() && (s.retireAt.IsZero() || h.now().Before(s.retireAt)) {
			s.refs++
			h.mu.Unlock()
			return s, nil
		}
		if ch := h.dialing; ch != nil {
			h.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		h.dialing = ch
		h.mu.Unlock()

		s, err := h.connect(ctx)

		h.mu.Lock()
		h.dialing = nil
		close(ch)
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		if h.closed {
			h.mu.Unlock()
			s.close()
			return nil, ErrClosed
		}
		var idle *session
		if old := h.sess; old != nil {
			idle = h.retireLocked(old)
		}
		h.sess = s
		h.sessions = append(h.sessions, s)
		s.refs++
		h.mu.Unlock()
		if idle != nil {
			idle.close()
		}
		return s, nil
	}
}

// connect makes a new session: TCP connection and Hadoop IPC handshake
// (the handshake only writes; the first call reads).
func (h *HDFS) connect(ctx context.Context) (*session, error) {
	s := &session{h: h, sem: make(chan struct{}, 1)}
	s.dialCtx.Store(&ctx)
	defer s.dialCtx.Store(nil)
	copts := hdfs.ClientOptions{
		Addresses:              h.opts.Namenodes,
		User:                   h.opts.User,
		UseDatanodeHostname:    h.opts.UseDatanodeHostname,
		NamenodeDialFunc:       s.dialNamenode,
		DatanodeDialFunc:       s.dialDatanode,
		DataTransferProtection: h.opts.DataTransferProtection,
	}
	if h.saslQOPs != nil {
		copts.DataTransferProtection = "" // dialDatanode runs the exchange
	}
	if h.opts.Kerberos && h.opts.Token == nil {
		// The client speaks GSSAPI itself, and mutually authenticates.
		copts.KerberosClient = h.opts.Login
		copts.KerberosServicePrincipleName, _ = kerberos.SplitPrincipal(h.opts.NamenodePrincipal)
	}
	client, err := hdfs.NewClient(copts)
	if err != nil {
		if p := s.lastDialErr.Load(); p != nil {
			err = *p // the client flattens it into a string
		}
		return nil, h.connectError(err)
	}
	s.client = client
	h.connects.Add(1)
	if h.opts.EncryptDataTransfer {
		s.retireAt = h.dataKeyRetirement(ctx)
	}
	return s, nil
}

// dataKeyRetirement returns when a session made now must stop taking new
// operations, where DataNodes encrypt every block (dfs.encrypt.data.transfer).
// Its client authenticates to them with a data encryption key that it
// asks the NameNode for once, at its first DataNode connection, and then
// keeps. A DataNode accepts the key only while the block key it was made
// from exists, a while after the expiry date the NameNode gives it
// (dfs.block.access.token.lifetime from then); Hadoop's own client asks
// for a new key once that date has passed. Here the session gives way to
// a new one, with a new client and key, before the expiry date of a key
// asked for now: the client's own, asked for later, expires no earlier.
// Files already open keep their session until they are closed. A
// NameNode that gives no key (it does not encrypt) leaves the session
// for good; where the call fails, or the date is not after now, the
// session is replaced after blockTokenFallbackLife.
func (h *HDFS) dataKeyRetirement(ctx context.Context) time.Time {
	start := h.now()
	var key *hpb.DataEncryptionKeyProto
	err := h.namenodeCall(ctx, "data encryption key", func(ctx context.Context, _ string, c *hrpc.Conn) error {
		resp := &hpb.GetDataEncryptionKeyResponseProto{}
		if err := c.Call(ctx, "getDataEncryptionKey", &hpb.GetDataEncryptionKeyRequestProto{}, resp); err != nil {
			return err
		}
		key = resp.GetDataEncryptionKey()
		return nil
	})
	if err == nil && key == nil {
		return time.Time{}
	}
	ms := key.GetExpiryDate()
	life := time.UnixMilli(int64(min(ms, math.MaxInt64))).Sub(start)
	if err != nil || life <= 0 {
		return start.Add(blockTokenFallbackLife)
	}
	return start.Add(life - min(blockTokenMargin, life/2))
}

// now is the time sessions are retired by: the clock, moved by a test.
func (h *HDFS) now() time.Time {
	return time.Now().Add(time.Duration(h.clockSkew.Load()))
}

func (h *HDFS) connectError(err error) error {
	return fmt.Errorf("connect to NameNode %s as %s: %w",
		strings.Join(h.opts.Namenodes, ","), h.opts.User, err)
}

// release gives back a reference taken by acquire.
func (h *HDFS) release(s *session) {
	h.mu.Lock()
	s.refs--
	closeNow := s.refs == 0 && h.sess != s && !h.closed && contains(h.sessions, s)
	if closeNow {
		h.sessions = remove(h.sessions, s)
	}
	h.mu.Unlock()
	if closeNow {
		s.close()
	}
}

// retireLocked stops giving s to new operations. It returns s if nothing
// uses it any more: the caller must then close it, after releasing h.mu
// (close waits for the client's own lock). h.mu must be held.
func (h *HDFS) retireLocked(s *session) *session {
	if h.sess == s {
		h.sess = nil
	}
	if s.refs == 0 && contains(h.sessions, s) {
		h.sessions = remove(h.sessions, s)
		return s
	}
	return nil
}

func contains(ss []*session, s *session) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func remove(ss []*session, s *session) []*session {
	out := ss[:0]
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// call runs one operation that makes NameNode calls through the client,
// bounded by ctx and RPCTimeout, and maps its error. An idempotent
// operation that finds the NameNode connection lost is tried once more,
// on a new connection.
func (h *HDFS) call(ctx context.Context, op, uri string, idempotent bool, fn func(c *hdfs.Client) error) error {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return pathError(op, uri, err)
		}
		s, err := h.acquire(ctx)
		if err != nil {
			return opError(op, uri, err)
		}
		lost, err := h.guarded(ctx, s, op, uri, fn)
		h.release(s)
		if !lost || !idempotent || attempt > 0 {
			return err
		}
	}
}

// guarded runs fn on s's client holding the call slot, aborting the
// NameNode connection if ctx ends or RPCTimeout passes first. lost
// reports that the connection failed under fn (not by ctx or timeout):
// the session is then retired, and fn may be retried on a new one.
func (h *HDFS) guarded(ctx context.Context, s *session, op, uri string, fn func(c *hdfs.Client) error) (lost bool, err error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return false, pathError(op, uri, ctx.Err())
	}
	defer func() { <-s.sem }()

	cctx, cancel := ctx, context.CancelFunc(func() {})
	ctxDeadline, ctxBound := ctx.Deadline()
	if d, ok := deadlineOf(ctx, time.Now(), h.opts.RPCTimeout); ok {
		cctx, cancel = context.WithDeadline(ctx, d)
		// The deadline is ctx's own unless RPCTimeout ends earlier. (Both
		// timers may fire at once; report the caller's deadline then.)
		ctxBound = ctxBound && !d.Before(ctxDeadline)
	}
	defer cancel()
	s.dialCtx.Store(&cctx)
	stop := context.AfterFunc(cctx, s.abort)
	err = fn(s.client)
	aborted := !stop()
	s.dialCtx.Store(nil)
	if aborted {
		// s is still referenced by the caller, so it is closed on release.
		h.mu.Lock()
		h.retireLocked(s)
		h.mu.Unlock()
		cerr := ctx.Err()
		if cerr == nil && ctxBound {
			cerr = context.DeadlineExceeded
		}
		if cerr != nil {
			return false, pathError(op, uri, fmt.Errorf("NameNode %s did not answer: %w", h.namenodeAddr(s), cerr))
		}
		return false, pathError(op, uri, fmt.Errorf("NameNode %s did not answer within %v: %w",
			h.namenodeAddr(s), h.opts.RPCTimeout, os.ErrDeadlineExceeded))
	}
	if err == nil {
		return false, nil
	}
	mapped := h.mapError(s, err)
	if connLost(err) {
		s.broken.Store(true)
		h.mu.Lock()
		h.retireLocked(s)
		h.mu.Unlock()
		if !strings.HasPrefix(mapped.Error(), "connect to NameNode") {
			mapped = fmt.Errorf("connection to NameNode %s lost: %w", h.namenodeAddr(s), mapped)
		}
		return true, opError(op, uri, mapped)
	}
	return false, opError(op, uri, mapped)
}

// connLost reports whether an error of the client means that its
// NameNode connection is gone (closed, reset, or out of step), rather
// than an answer from the NameNode.
func connLost(err error) bool {
	var remote hdfs.Error
	if errors.As(err, &remote) {
		return false
	}
	var ne net.Error
	msg := err.Error()
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.HasPrefix(msg, "no available namenodes") || strings.Contains(msg, "unexpected sequence number") ||
		strings.Contains(msg, "invalid response from namenode")
}

func (h *HDFS) namenodeAddr(s *session) string {
	if c := s.conn.Load(); c != nil {
		return (*c).RemoteAddr().String()
	}
	return strings.Join(h.opts.Namenodes, ",")
}

// mapError turns the client's errors into this package's: remote
// exceptions into *RemoteError, and the client's flattened "no available
// namenodes" back into the dial error it hides.
func (h *HDFS) mapError(s *session, err error) error {
	err = innerError(err)
	var remote hdfs.Error
	if errors.As(err, &remote) {
		return &RemoteError{Method: remote.Method(), Class: remote.Exception(), Message: remote.Message()}
	}
	if strings.HasPrefix(err.Error(), "no available namenodes") {
		if p := s.lastDialErr.Load(); p != nil {
			return h.connectError(*p)
		}
		return h.connectError(err)
	}
	if strings.HasPrefix(err.Error(), "rspauth ") {
		// The client library's DIGEST-MD5 exchange with a DataNode
		// that encrypts every block: the DataNode answered without
		// authenticating, its reason dropped by the library.
		return fmt.Errorf("a DataNode refused this client's data encryption key (dfs.encrypt.data.transfer); most likely the key expired or the DataNode does not know its block key yet: %w", err)
	}
	return err
}

// opError wraps err as the error of op on uri, unless it already is a
// *fs.PathError made by pathError.
func opError(op, uri string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.HasPrefix(err.Error(), "dfs: ") {
		return err
	}
	return pathError(op, uri, err)
}
