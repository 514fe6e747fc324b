package zmq

import (
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"

	zmq4 "github.com/pebbe/zmq4"
)

// Curve holds the CURVE keys of a job (ZeroMQ's CurveZMQ: Curve25519 key
// exchange, then every frame encrypted and authenticated). Every ROUTER
// is a CURVE server with the job's server key pair; every DEALER is a
// CURVE client with the job's client key pair, and knows the server's
// public key. A ROUTER accepts a connection only when the client proves,
// in the CURVE handshake, that it holds the secret key of one of
// Clients: its transport answers ZeroMQ's authentication requests (ZAP)
// itself. A peer without the keys neither connects nor reads a frame.
//
// DeriveCurve derives the keys from the job secret, so that every node
// holding the secret holds them and no key travels on its own.
type Curve struct {
	ServerPublic, ServerSecret [32]byte
	ClientPublic, ClientSecret [32]byte
	// Clients are the public keys a ROUTER accepts. DeriveCurve sets it
	// to the job's client key.
	Clients [][32]byte
}

// The HKDF labels of the job's CURVE keys.
const (
	curveServerInfo = "spindle curve server v1"
	curveClientInfo = "spindle curve client v1"
)

// DeriveCurve derives the job's CURVE keys from its secret with
// HKDF-SHA256 (one label for the server key pair, one for the client
// key pair). An empty secret is an error.
func DeriveCurve(secret []byte) (*Curve, error) {
	if len(secret) == 0 {
		return nil, errors.New("zmq: CURVE keys need a job secret")
	}
	pair := func(info string) (pub, sec [32]byte, err error) {
		k, err := hkdf.Key(sha256.New, secret, nil, info, 32)
		if err != nil {
			return pub, sec, err
		}
		priv, err := ecdh.X25519().NewPrivateKey(k)
		if err != nil {
			return pub, sec, err
		}
		copy(sec[:], priv.Bytes())
		copy(pub[:], priv.PublicKey().Bytes())
		return pub, sec, nil
	}
	var c Curve
	var err error
	if c.ServerPublic, c.ServerSecret, err = pair(curveServerInfo); err != nil {
		return nil, fmt.Errorf("zmq: derive the CURVE server key: %w", err)
	}
	if c.ClientPublic, c.ClientSecret, err = pair(curveClientInfo); err != nil {
		return nil, fmt.Errorf("zmq: derive the CURVE client key: %w", err)
	}
	c.Clients = [][32]byte{c.ClientPublic}
	return &c, nil
}

// curveAvailable reports whether libzmq was built with CURVE.
func curveAvailable() error {
	if !zmq4.HasCurve() {
		return errors.New("zmq: this libzmq has no CURVE support (build it with libsodium), or set the job insecure")
	}
	return nil
}

// zapEndpoint is where libzmq sends the authentication requests of the
// sockets of a context (RFC 27, ZAP).
const zapEndpoint = "inproc://zeromq.zap.01"

// zapDomain is the ZAP domain of the ROUTER, sealedDomain that of the
// sealed route's ROUTER.
const (
	zapDomain    = "spindle"
	sealedDomain = "spindle-sealed"
)

// The sealed route has no ZeroMQ cipher (its frames are sealed one by
// one), but it is not open to all: its ROUTER is a ZeroMQ PLAIN server,
// which accepts only a client that gives the route's password, derived
// from the job's CURVE keys. Without it, anyone who could reach the port
// could have a node hold whatever they sent: libzmq keeps the frames of
// a message that has not ended, with no bound. A client refused in the
// handshake sends nothing more. The password travels in clear when a
// connection opens; it lets its holder send bytes to the route, which
// are dropped unless an envelope, which only CURVE carries, names them.
const (
	sealedUser = "spindle"
	sealedInfo = "spindle sealed route v1"
)

// sealedPassword derives the sealed route's password from the job's
// CURVE server key, which every node of the job holds.
func sealedPassword(c *Curve) ([]byte, error) {
	return hkdf.Key(sha256.New, c.ServerSecret[:], nil, sealedInfo, 32)
}

// secureSealedServer makes s, the sealed route's ROUTER not yet bound, a
// PLAIN server whose connections the transport's ZAP handler checks.
func (t *Transport) secureSealedServer(s *zmq4.Socket) error {
	if err := t.startZAP(); err != nil {
		return err
	}
	if err := s.SetZapDomain(sealedDomain); err != nil {
		return fmt.Errorf("set ZMQ_ZAP_DOMAIN: %w", err)
	}
	if err := s.SetPlainServer(1); err != nil {
		return fmt.Errorf("set ZMQ_PLAIN_SERVER: %w", err)
	}
	return nil
}

// secureSealedClient makes s, a DEALER to a peer's sealed route not yet
// connected, a PLAIN client with the route's password.
func (t *Transport) secureSealedClient(s *zmq4.Socket) error {
	pass, err := sealedPassword(t.opts.Curve)
	if err != nil {
		return fmt.Errorf("the sealed route's password: %w", err)
	}
	if err := s.SetPlainUsername(sealedUser); err != nil {
		return fmt.Errorf("set ZMQ_PLAIN_USERNAME: %w", err)
	}
	if err := s.SetPlainPassword(string(pass)); err != nil {
		return fmt.Errorf("set ZMQ_PLAIN_PASSWORD: %w", err)
	}
	return nil
}

// secureServer makes s, a ROUTER not yet bound, a CURVE server of
// Options.Curve, starting the transport's ZAP handler on first use. It
// does nothing without Options.Curve.
func (t *Transport) secureServer(s *zmq4.Socket) error {
	c := t.opts.Curve
	if c == nil {
		return nil
	}
	if err := curveAvailable(); err != nil {
		return err
	}
	if err := t.startZAP(); err != nil {
		return err
	}
	if err := s.SetZapDomain(zapDomain); err != nil {
		return fmt.Errorf("set ZMQ_ZAP_DOMAIN: %w", err)
	}
	if err := s.SetCurveServer(1); err != nil {
		return fmt.Errorf("set ZMQ_CURVE_SERVER: %w", err)
	}
	if err := s.SetCurveSecretkey(string(c.ServerSecret[:])); err != nil {
		return fmt.Errorf("set ZMQ_CURVE_SECRETKEY: %w", err)
	}
	return nil
}

// secureClient makes s, a DEALER not yet connected, a CURVE client of
// Options.Curve. It does nothing without Options.Curve.
func (t *Transport) secureClient(s *zmq4.Socket) error {
	c := t.opts.Curve
	if c == nil {
		return nil
	}
	if err := curveAvailable(); err != nil {
		return err
	}
	if err := s.SetCurveServerkey(string(c.ServerPublic[:])); err != nil {
		return fmt.Errorf("set ZMQ_CURVE_SERVERKEY: %w", err)
	}
	if err := s.SetCurvePublickey(string(c.ClientPublic[:])); err != nil {
		return fmt.Errorf("set ZMQ_CURVE_PUBLICKEY: %w", err)
	}
	if err := s.SetCurveSecretkey(string(c.ClientSecret[:])); err != nil {
		return fmt.Errorf("set ZMQ_CURVE_SECRETKEY: %w", err)
	}
	return nil
}

// startZAP binds the transport's ZAP handler in its context, once, and
// starts the goroutine that answers it. Close stops it with the receive
// loop (it is in t.wg).
func (t *Transport) startZAP() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return errors.New("closed")
	}
	if t.zapOn {
		return nil
	}
	s, err := t.zctx.NewSocket(zmq4.REP)
	if err != nil {
		return fmt.Errorf("new ZAP socket: %w", err)
	}
	if err := s.SetLinger(0); err != nil {
		_ = s.Close()
		return fmt.Errorf("ZAP socket: set ZMQ_LINGER: %w", err)
	}
	if err := s.Bind(zapEndpoint); err != nil {
		_ = s.Close()
		return fmt.Errorf("bind %s: %w", zapEndpoint, err)
	}
	wakeRecv, wakeSend, err := t.wakePair(zapWakeEndpoint)
	if err != nil {
		_ = s.Close()
		return err
	}
	t.zapOn, t.zapWake = true, wakeSend
	t.wg.Add(1)
	go t.zapLoop(s, wakeRecv)
	return nil
}

// zapWakeEndpoint is the inproc endpoint Close uses to wake the ZAP loop.
const zapWakeEndpoint = "inproc://spindle-zmq-zap-wake"

// zapLoop answers ZAP requests on s until Close: it accepts a CURVE
// client whose public key is one of Curve.Clients and refuses anything
// else. Close wakes it through wake (recvBackstop bounds the wait if that
// were lost).
func (t *Transport) zapLoop(s, wake *zmq4.Socket) {
	defer t.wg.Done()
	defer s.Close()
	defer wake.Close()
	poller := zmq4.NewPoller()
	poller.Add(s, zmq4.POLLIN)
	poller.Add(wake, zmq4.POLLIN)
	for {
		select {
		case <-t.done:
			return
		default:
		}
		polled, err := poller.Poll(recvBackstop)
		if err != nil {
			select {
			case <-t.done:
			default:
				t.log.WithError(err).Error("ZAP handler stopped")
			}
			return
		}
		if !slices.ContainsFunc(polled, func(p zmq4.Polled) bool { return p.Socket == s }) {
			continue
		}
		req, err := s.RecvMessageBytes(0)
		if err != nil {
			continue
		}
		reply := t.zapReply(req)
		if _, err := s.SendMessage(reply...); err != nil {
			t.log.WithError(err).Debug("ZAP reply not sent")
		}
	}
}

// zapReply answers one ZAP request (RFC 27): version, request id, domain,
// address, identity, mechanism, credentials. In zapDomain it accepts a
// CURVE client with a key of Curve.Clients; in sealedDomain, a PLAIN
// client with the sealed route's password; nothing else.
func (t *Transport) zapReply(req [][]byte) []any {
	id := []byte{}
	if len(req) > 1 {
		id = req[1]
	}
	refuse := func(why string) []any {
		t.refused.Add(1)
		t.log.WithField("reason", why).Debug("connection refused: not a peer of this job")
		return []any{"1.0", id, "400", why, "", ""}
	}
	if len(req) < 6 || string(req[0]) != "1.0" {
		return refuse("malformed ZAP request")
	}
	addr := string(req[3])
	ok := []any{"1.0", id, "200", "OK", "", ""}
	switch string(req[2]) {
	case zapDomain:
		if string(req[5]) != "CURVE" || len(req) != 7 || len(req[6]) != 32 {
			return refuse("peer " + addr + " does not use CURVE")
		}
		for _, k := range t.opts.Curve.Clients {
			if subtle.ConstantTimeCompare(k[:], req[6]) == 1 {
				return ok
			}
		}
		return refuse("peer " + addr + " holds no key of this job")
	case sealedDomain:
		if string(req[5]) != "PLAIN" || len(req) != 8 {
			return refuse("peer " + addr + " does not use PLAIN on the sealed route")
		}
		pass, err := sealedPassword(t.opts.Curve)
		if err != nil || string(req[6]) != sealedUser || subtle.ConstantTimeCompare(pass, req[7]) != 1 {
			return refuse("peer " + addr + " does not know the sealed route's password")
		}
		return ok
	}
	return refuse("peer " + addr + " in an unknown ZAP domain")
}
