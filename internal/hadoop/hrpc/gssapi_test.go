package hrpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// sessionKey is the key the made-up service ticket shares with the fake
// server (aes256-cts-hmac-sha1-96).
var sessionKey = types.EncryptionKey{KeyType: 18, KeyValue: bytes.Repeat([]byte{7}, 32)}

// ticketClient returns a Kerberos client for alice@EXAMPLE.COM whose
// cache already holds a ticket for spindle/localhost, so that no KDC is
// needed: the handshake takes it from the cache.
func ticketClient(t *testing.T) *krbclient.Client {
	t.Helper()
	be := binary.BigEndian
	var b []byte
	u32 := func(v uint32) { b = be.AppendUint32(b, v) }
	data := func(s []byte) { u32(uint32(len(s))); b = append(b, s...) }
	principal := func(nameType uint32, comps ...string) {
		u32(nameType)
		u32(uint32(len(comps)))
		data([]byte("EXAMPLE.COM"))
		for _, c := range comps {
			data([]byte(c))
		}
	}
	ticket := func(comps ...string) []byte {
		tkt := messages.Ticket{TktVNO: 5, Realm: "EXAMPLE.COM", SName: types.NewPrincipalName(2, strings.Join(comps, "/")),
			EncPart: types.EncryptedData{EType: 18, KVNO: 1, Cipher: bytes.Repeat([]byte{1}, 64)}}
		raw, err := tkt.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	credential := func(comps ...string) {
		principal(1, "alice")
		principal(2, comps...)
		b = be.AppendUint16(b, uint16(sessionKey.KeyType))
		data(sessionKey.KeyValue)
		now := time.Now()
		for _, ts := range []time.Time{now.Add(-time.Minute), now.Add(-time.Minute), now.Add(time.Hour), now.Add(time.Hour)} {
			u32(uint32(ts.Unix()))
		}
		b = append(b, 0, 0, 0, 0, 0)
		u32(0)
		u32(0)
		data(ticket(comps...))
		data(nil)
	}
	b = append(b, 5, 4, 0, 0)
	principal(1, "alice")
	credential("krbtgt", "EXAMPLE.COM")
	credential("spindle", "localhost")
	p := filepath.Join(t.TempDir(), "cc")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cc, err := credentials.LoadCCache(p)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := krbclient.NewFromCCache(cc, config.New())
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// gssServer plays a Kerberos-secured Hadoop server's side of the GSSAPI
// exchange, offering the layers in mask, and returns the connection
// context's user.
func gssServer(s *fakeServer, principal string, mask byte, badSeal bool) (string, error) {
	pre, err := s.readN(7)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(pre, saslPreamble) {
		return "", fmt.Errorf("preamble %x", pre)
	}
	if _, _, err := s.readRequest(); err != nil { // NEGOTIATE
		return "", err
	}
	service, host, _ := strings.Cut(principal, "/")
	adv := &pb.RpcSaslProto_SaslAuth{Method: proto.String("KERBEROS"), Mechanism: proto.String("GSSAPI"), Protocol: proto.String(service), ServerId: proto.String(host)}
	tokenAuth := &pb.RpcSaslProto_SaslAuth{Method: proto.String("TOKEN"), Mechanism: proto.String("DIGEST-MD5"), Protocol: proto.String(""), ServerId: proto.String("default")}
	if err := s.reply(saslCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_NEGOTIATE.Enum(), Auths: []*pb.RpcSaslProto_SaslAuth{tokenAuth, adv}}, "", ""); err != nil {
		return "", err
	}
	_, msgs, err := s.readRequest()
	if err != nil {
		return "", err
	}
	init := &pb.RpcSaslProto{}
	if err := proto.Unmarshal(msgs[0], init); err != nil {
		return "", err
	}
	if init.GetState() != pb.RpcSaslProto_INITIATE || len(init.Auths) != 1 || init.Auths[0].GetMethod() != "KERBEROS" {
		return "", fmt.Errorf("INITIATE %v", init)
	}
	var k spnego.KRB5Token
	if err := k.Unmarshal(init.GetToken()); err != nil || !k.IsAPReq() {
		return "", fmt.Errorf("INITIATE token is not a GSS-API AP-REQ: %v", err)
	}
	if err := k.APReq.DecryptAuthenticator(sessionKey); err != nil {
		return "", fmt.Errorf("authenticator: %w", err)
	}
	if who := k.APReq.Authenticator.CName.PrincipalNameString() + "@" + k.APReq.Authenticator.CRealm; who != "alice@EXAMPLE.COM" {
		return "", fmt.Errorf("authenticator of %s", who)
	}
	offer := gssapi.WrapToken{Flags: 0x01, EC: 12, RRC: 0, SndSeqNum: 0, Payload: []byte{mask, 0, 0x10, 0}}
	key := sessionKey
	if badSeal {
		key = types.EncryptionKey{KeyType: 18, KeyValue: bytes.Repeat([]byte{8}, 32)}
	}
	if err := offer.SetCheckSum(key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
		return "", err
	}
	raw, err := offer.Marshal()
	if err != nil {
		return "", err
	}
	if err := s.reply(saslCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_CHALLENGE.Enum(), Token: raw}, "", ""); err != nil {
		return "", err
	}
	_, msgs, err = s.readRequest()
	if err != nil {
		return "", err
	}
	resp := &pb.RpcSaslProto{}
	if err := proto.Unmarshal(msgs[0], resp); err != nil {
		return "", err
	}
	var choice gssapi.WrapToken
	if err := choice.Unmarshal(resp.GetToken(), false); err != nil {
		return "", fmt.Errorf("RESPONSE: %w", err)
	}
	if ok, err := choice.Verify(sessionKey, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
		return "", fmt.Errorf("RESPONSE does not verify: %v", err)
	}
	if len(choice.Payload) != 4 || choice.Payload[0]&mask == 0 || choice.Payload[0]&(choice.Payload[0]-1) != 0 {
		return "", fmt.Errorf("security layer chosen %x of those offered %x", choice.Payload, mask)
	}
	if err := s.reply(saslCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_SUCCESS.Enum()}, "", ""); err != nil {
		return "", err
	}
	var acc *acceptor
	if choice.Payload[0] != qopAuth {
		acc = &acceptor{sealed: choice.Payload[0] == qopPrivacy}
	}
	msgs, err = acc.read(s)
	if err != nil {
		return "", err
	}
	cc := &pb.IpcConnectionContextProto{}
	if err := proto.Unmarshal(msgs[0], cc); err != nil {
		return "", err
	}
	// One call, answered through the layer.
	msgs, err = acc.read(s)
	if err != nil {
		return "", err
	}
	req := &pb.GetDelegationTokenRequestProto{}
	if err := proto.Unmarshal(msgs[1], req); err != nil {
		return "", err
	}
	answer := &pb.GetDelegationTokenResponseProto{Token: &pb.TokenProto{Identifier: []byte(req.GetRenewer()), Password: []byte{}, Kind: proto.String("k"), Service: proto.String("s")}}
	return cc.GetUserInfo().GetEffectiveUser(), acc.reply(s, answer)
}

// acceptor is the server's side of the security layer: it unwraps what
// the client sends and wraps its answer. A nil acceptor reads and writes
// plain frames.
type acceptor struct {
	sealed bool
	seq    uint64
	plain  []byte
}

// read returns the messages of the next frame (header first dropped).
func (a *acceptor) read(s *fakeServer) ([][]byte, error) {
	if a == nil {
		_, msgs, err := s.readRequest()
		return msgs, err
	}
	for len(a.plain) < 4 || len(a.plain) < 4+int(binary.BigEndian.Uint32(a.plain)) {
		h, msgs, err := s.readRequest()
		if err != nil {
			return nil, err
		}
		w := &pb.RpcSaslProto{}
		if err := proto.Unmarshal(msgs[0], w); err != nil || h.GetCallId() != saslCallID || w.GetState() != pb.RpcSaslProto_WRAP {
			return nil, fmt.Errorf("not a WRAP message: %v %v", h, err)
		}
		tok := w.GetToken()
		if len(tok) < 16 || tok[2]&0x01 != 0 || (tok[2]&0x02 != 0) != a.sealed {
			return nil, fmt.Errorf("wrap token flags %x, sealed %v", tok[2], a.sealed)
		}
		var plain []byte
		if a.sealed {
			p, err := crypto.DecryptMessage(tok[16:], sessionKey, keyusage.GSSAPI_INITIATOR_SEAL)
			if err != nil {
				return nil, err
			}
			plain = p[:len(p)-16]
		} else {
			var t gssapi.WrapToken
			if err := t.Unmarshal(tok, false); err != nil {
				return nil, err
			}
			if ok, err := t.Verify(sessionKey, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
				return nil, fmt.Errorf("client wrap token does not verify: %v", err)
			}
			plain = t.Payload
		}
		a.plain = append(a.plain, plain...)
	}
	n := int(binary.BigEndian.Uint32(a.plain))
	frame := a.plain[4 : 4+n]
	a.plain = a.plain[4+n:]
	var msgs [][]byte
	for len(frame) > 0 {
		m, rest, err := splitDelimited(frame)
		if err != nil {
			return nil, err
		}
		msgs, frame = append(msgs, m), rest
	}
	return msgs[1:], nil
}

// reply answers call 0 with body, through the layer.
func (a *acceptor) reply(s *fakeServer, body proto.Message) error {
	if a == nil {
		return s.reply(0, pb.RpcResponseHeaderProto_SUCCESS, body, "", "")
	}
	inner, err := packet(&pb.RpcResponseHeaderProto{CallId: proto.Uint32(0), Status: pb.RpcResponseHeaderProto_SUCCESS.Enum()}, body)
	if err != nil {
		return err
	}
	a.seq++
	hdr := []byte{0x05, 0x04, 0x01, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(a.seq)}
	var tok []byte
	if a.sealed {
		hdr[2] |= 0x02
		et, err := crypto.GetEtype(sessionKey.KeyType)
		if err != nil {
			return err
		}
		_, ct, err := et.EncryptMessage(sessionKey.KeyValue, append(append([]byte{}, inner...), hdr...), keyusage.GSSAPI_ACCEPTOR_SEAL)
		if err != nil {
			return err
		}
		// Rotated right by 28 bytes, as some acceptors send it.
		hdr[7] = 28
		tok = append(append(hdr, ct[len(ct)-28:]...), ct[:len(ct)-28]...)
	} else {
		t := gssapi.WrapToken{Flags: 0x01, EC: 12, SndSeqNum: a.seq, Payload: inner}
		if err := t.SetCheckSum(sessionKey, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
			return err
		}
		if tok, err = t.Marshal(); err != nil {
			return err
		}
	}
	return s.reply(saslCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_WRAP.Enum(), Token: tok}, "", "")
}

// TestSaslKerberos: the client presents its ticket for the configured
// principal, checks the server's sealed offer with the ticket's key,
// chooses authentication without a security layer, and names its
// principal in the connection context. It refuses a server with another
// principal, one whose offer is not sealed with the ticket's key, and one
// that insists on privacy, each with an error that says so.
func TestSaslKerberos(t *testing.T) {
	cl := ticketClient(t)
	for _, c := range []struct {
		name, server string
		mask         byte
		badSeal      bool
		want         string // error; "" for success
	}{
		{"authentication", "spindle/localhost", qopAuth, false, ""},
		{"integrity", "spindle/localhost", qopIntegrity, false, ""},
		{"privacy", "spindle/localhost", qopPrivacy, false, ""},
		{"the strongest offered", "spindle/localhost", qopAuth | qopIntegrity | qopPrivacy, false, ""},
		{"other principal", "nn/elsewhere", qopAuth, false, "the server is nn/elsewhere, but its principal should be spindle/localhost"},
		{"bad seal", "spindle/localhost", qopAuth, true, "does not verify with the ticket's key"},
		{"nothing in common", "spindle/localhost", qopPrivacy, false, "the server offers [privacy] (hadoop.rpc.protection), this client accepts [authentication]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cnc, snc := net.Pipe()
			type result struct {
				user string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				defer snc.Close()
				u, err := gssServer(&fakeServer{nc: snc}, c.server, c.mask, c.badSeal)
				done <- result{u, err}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			opts := Options{Protocol: testProtocol, Auth: AuthKerberos, Kerberos: cl, ServicePrincipal: "spindle/localhost"}
			if c.name == "nothing in common" {
				opts.Protection = []string{ProtectAuthentication}
			}
			conn, err := NewConn(ctx, cnc, opts)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				resp := &pb.GetDelegationTokenResponseProto{}
				if err := conn.Call(ctx, "getDelegationToken", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("through the layer")}, resp); err != nil {
					t.Fatalf("call: %v", err)
				}
				if got := string(resp.GetToken().GetIdentifier()); got != "through the layer" {
					t.Errorf("answer %q", got)
				}
				conn.Close()
				r := <-done
				if r.err != nil {
					t.Fatalf("server: %v", r.err)
				}
				if r.user != "alice@EXAMPLE.COM" {
					t.Errorf("connection context names %q, want alice@EXAMPLE.COM", r.user)
				}
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("handshake succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
			<-done
		})
	}
}

// TestAuthenticateForALibrary: Authenticate opens a connection with
// SASL for a library that then writes its own preamble, which is
// dropped, its connection context and its calls, which go through the
// negotiated layer, as do the answers it reads.
func TestAuthenticateForALibrary(t *testing.T) {
	cl := ticketClient(t)
	for _, mask := range []byte{qopAuth, qopPrivacy} {
		cnc, snc := net.Pipe()
		done := make(chan error, 1)
		go func() {
			defer snc.Close()
			u, err := gssServer(&fakeServer{nc: snc}, "spindle/localhost", mask, false)
			if err == nil && u != "library-user" {
				err = fmt.Errorf("connection context names %q", u)
			}
			done <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lib, err := Authenticate(ctx, cnc, Options{Protocol: testProtocol, Auth: AuthKerberos, Kerberos: cl, ServicePrincipal: "spindle/localhost"})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// The library's preamble, written in two pieces, then its context
		// and a call in one write.
		if n, err := lib.Write(simplePreamble[:3]); n != 3 || err != nil {
			t.Fatalf("write: %d %v", n, err)
		}
		ctxPkt, err := packet(requestHeader(connContextCallID, []byte{}),
			&pb.IpcConnectionContextProto{UserInfo: &pb.UserInformationProto{EffectiveUser: proto.String("library-user")}, Protocol: proto.String(testProtocol)})
		if err != nil {
			t.Fatal(err)
		}
		call, err := packet(requestHeader(0, []byte{}), &pb.RequestHeaderProto{MethodName: proto.String("getDelegationToken"),
			DeclaringClassProtocolName: proto.String(testProtocol), ClientProtocolVersion: proto.Uint64(1)},
			&pb.GetDelegationTokenRequestProto{Renewer: proto.String("renewer")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lib.Write(append(append(append([]byte{}, simplePreamble[3:]...), ctxPkt...), call...)); err != nil {
			t.Fatal(err)
		}
		r, err := readResponse(lib, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("layer %x: read the answer: %v", mask, err)
		}
		answer := &pb.GetDelegationTokenResponseProto{}
		if err := proto.Unmarshal(r.body, answer); err != nil || string(answer.GetToken().GetIdentifier()) != "renewer" {
			t.Errorf("layer %x: answer %v, %v", mask, answer, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("layer %x: %v", mask, err)
		}
		lib.Close()
	}
	if _, err := SkipPreamble(&net.TCPConn{}).Write([]byte("GET / HTTP/1.1")); err == nil || errors.Is(err, net.ErrClosed) {
		t.Errorf("a stream that is not Hadoop IPC got through: %v", err)
	}
}

// FuzzGSSUnwrap: whatever a server sends as a wrap token, Unwrap returns
// an error or a message, and never panics; only tokens sealed or signed
// with the key are accepted.
func FuzzGSSUnwrap(f *testing.F) {
	for _, sealed := range []bool{false, true} {
		a := &acceptor{sealed: sealed}
		inner := []byte("\x00\x00\x00\x02\x01\x00")
		a.seq++
		hdr := []byte{0x05, 0x04, 0x01, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
		t := gssapi.WrapToken{Flags: 0x01, EC: 12, SndSeqNum: 1, Payload: inner}
		if err := t.SetCheckSum(sessionKey, keyusage.GSSAPI_ACCEPTOR_SEAL); err == nil {
			if tok, err := t.Marshal(); err == nil {
				f.Add(tok, sealed)
			}
		}
		f.Add(append(hdr, inner...), sealed)
	}
	f.Add([]byte{0x05, 0x04, 0x03, 0xFF, 0, 0, 0xff, 0xff}, true)
	et, err := crypto.GetEtype(sessionKey.KeyType)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok []byte, sealed bool) {
		g := &gssLayer{key: sessionKey, et: et, sealed: sealed}
		if msg, err := g.Unwrap(tok); err == nil && len(msg) >= len(tok) {
			t.Fatalf("a %d-byte message out of a %d-byte token", len(msg), len(tok))
		}
	})
}
