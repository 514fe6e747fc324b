package hrpc

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testProtocol = "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB"

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeServer is the server end of a net.Pipe. Its methods fail the test
// through errs rather than t, since they run on their own goroutine.
type fakeServer struct {
	nc net.Conn
}

func (s *fakeServer) readN(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(s.nc, b)
	return b, err
}

// readRequest reads one frame and splits it into its delimited messages.
func (s *fakeServer) readRequest() (*pb.RpcRequestHeaderProto, [][]byte, error) {
	f, err := readFrame(s.nc, DefaultMaxFrame)
	if err != nil {
		return nil, nil, err
	}
	var msgs [][]byte
	for len(f) > 0 {
		var m []byte
		if m, f, err = splitDelimited(f); err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, m)
	}
	h := &pb.RpcRequestHeaderProto{}
	if len(msgs) == 0 {
		return nil, nil, errors.New("empty frame")
	}
	return h, msgs[1:], proto.Unmarshal(msgs[0], h)
}

func (s *fakeServer) reply(callID int32, status pb.RpcResponseHeaderProto_RpcStatusProto, body proto.Message, class, msg string) error {
	h := &pb.RpcResponseHeaderProto{CallId: proto.Uint32(uint32(callID)), Status: status.Enum()}
	msgs := []proto.Message{h}
	if status == pb.RpcResponseHeaderProto_SUCCESS {
		msgs = append(msgs, body)
	} else {
		h.ExceptionClassName, h.ErrorMsg = proto.String(class), proto.String(msg)
	}
	p, err := packet(msgs...)
	if err != nil {
		return err
	}
	_, err = s.nc.Write(p)
	return err
}

// pipe returns a client connected over net.Pipe to a server running
// serve after consuming the SIMPLE preamble and connection context.
func pipe(t *testing.T, opts Options, serve func(s *fakeServer) error) *Conn {
	t.Helper()
	cnc, snc := net.Pipe()
	s := &fakeServer{nc: snc}
	errc := make(chan error, 1)
	go func() {
		defer snc.Close()
		if _, err := s.readN(7); err != nil {
			errc <- err
			return
		}
		if _, _, err := s.readRequest(); err != nil {
			errc <- err
			return
		}
		errc <- serve(s)
	}()
	if opts.Protocol == "" {
		opts.Protocol = testProtocol
	}
	c, err := NewConn(context.Background(), cnc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if err := <-errc; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("fake server: %v", err)
		}
	})
	return c
}

// TestGoldenSimple checks the bytes of the preamble, the connection
// context and the first call against the protocol notes (§1.8).
func TestGoldenSimple(t *testing.T) {
	protoName := hex.EncodeToString([]byte(testProtocol))
	want := unhex(t, `
		68 72 70 63 09 00 00
		00 00 00 5d
		1a 08 02 10 00 18 05 22 10 30313233343536373839616263646566 28 01
		41 12 07 0a 05 616c696365 1a 36`+protoName+`
		00 00 00 6e
		1a 08 02 10 00 18 00 22 10 30313233343536373839616263646566 28 01
		4d 0a 11`+hex.EncodeToString([]byte("getNewApplication"))+` 12 36`+protoName+` 18 01
		04 0a 02 72 6d`)
	cnc, snc := net.Pipe()
	got := make(chan []byte, 1)
	go func() {
		defer snc.Close()
		b, _ := io.ReadAll(io.LimitReader(snc, int64(len(want))))
		got <- b
		s := &fakeServer{nc: snc}
		s.reply(0, pb.RpcResponseHeaderProto_SUCCESS, &pb.GetDelegationTokenResponseProto{}, "", "")
	}()
	var id [16]byte
	copy(id[:], "0123456789abcdef")
	c, err := NewConn(context.Background(), cnc, Options{Protocol: testProtocol, User: "alice", ClientID: id})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(context.Background(), "getNewApplication", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{}); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("wire bytes\n got %x\nwant %x", b, want)
	}
}

func TestGoldenSaslHeader(t *testing.T) {
	p, err := packet(requestHeader(saslCallID, []byte{}), &pb.RpcSaslProto{State: pb.RpcSaslProto_NEGOTIATE.Enum()})
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, "00 00 00 0e 0a 08 02 10 00 18 41 22 00 28 01 02 10 01"); !bytes.Equal(p, want) {
		t.Errorf("NEGOTIATE packet %x, want %x", p, want)
	}
	h, _ := proto.Marshal(&pb.RpcResponseHeaderProto{CallId: proto.Uint32(func(x int32) uint32 { return uint32(x) }(saslCallID)), Status: pb.RpcResponseHeaderProto_SUCCESS.Enum()})
	if want := unhex(t, "08 df ff ff ff 0f"); !bytes.HasPrefix(h, want) {
		t.Errorf("SASL response header %x, want prefix %x", h, want)
	}
}

// rfc2831 computes a DIGEST-MD5 response value (qop=auth, md5-sess) the
// plain way RFC 2831 §2.1.2.1 spells it out, independently of package sasl.
func rfc2831(user, realm, pass, nonce, cnonce, nc, uri string, server bool) string {
	h := func(s string) string { x := md5.Sum([]byte(s)); return hex.EncodeToString(x[:]) }
	y := md5.Sum([]byte(user + ":" + realm + ":" + pass))
	a1 := string(y[:]) + ":" + nonce + ":" + cnonce
	a2 := "AUTHENTICATE:" + uri
	if server {
		a2 = ":" + uri
	}
	return h(h(a1) + ":" + nonce + ":" + nc + ":" + cnonce + ":auth:" + h(a2))
}

func parseKV(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = strings.Trim(v, `"`)
	}
	return m
}

// TestSaslToken runs the TOKEN / DIGEST-MD5 exchange against a fake
// server with a fixed nonce and client nonce, checking the client's
// INITIATE byte for byte and the digest with an independent computation.
func TestSaslToken(t *testing.T) {
	ident, pass := []byte("identifier-bytes"), []byte("password-bytes")
	const nonce = "Tm9uY2VGaXhlZEZvclRlc3Q="
	adv := &pb.RpcSaslProto_SaslAuth{Method: proto.String("TOKEN"), Mechanism: proto.String("DIGEST-MD5"),
		Protocol: proto.String(""), ServerId: proto.String("default"),
		Challenge: []byte(`realm="default",nonce="` + nonce + `",qop="auth",charset=utf-8,algorithm=md5-sess`)}
	cnc, snc := net.Pipe()
	errc := make(chan error, 1)
	fixedRand := bytes.NewReader(bytes.Repeat([]byte{0x42}, 64))
	cnonce := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x42}, 24))
	user, pw := base64.StdEncoding.EncodeToString(ident), base64.StdEncoding.EncodeToString(pass)
	go func() {
		defer snc.Close()
		errc <- func() error {
			s := &fakeServer{nc: snc}
			pre, err := s.readN(7)
			if err != nil {
				return err
			}
			if !bytes.Equal(pre, []byte("hrpc\x09\x00\xdf")) {
				return fmt.Errorf("preamble %x", pre)
			}
			raw, err := s.readN(18)
			if err != nil {
				return err
			}
			if want := unhex(t, "00 00 00 0e 0a 08 02 10 00 18 41 22 00 28 01 02 10 01"); !bytes.Equal(raw, want) {
				return fmt.Errorf("NEGOTIATE %x, want %x", raw, want)
			}
			if err := s.reply(saslCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_NEGOTIATE.Enum(),
				Auths: []*pb.RpcSaslProto_SaslAuth{{Method: proto.String("SIMPLE"), Mechanism: proto.String("")}, adv}}, "", ""); err != nil {
				return err
			}
			h, msgs, err := s.readRequest()
			if err != nil {
				return err
			}
			init := &pb.RpcSaslProto{}
			if err := proto.Unmarshal(msgs[0], init); err != nil {
				return err
			}
			echo := proto.Clone(adv).(*pb.RpcSaslProto_SaslAuth)
			echo.Challenge = nil
			if h.GetCallId() != saslCallID || init.GetState() != pb.RpcSaslProto_INITIATE || len(init.Auths) != 1 || !proto.Equal(init.Auths[0], echo) || init.Auths[0].Protocol == nil {
				return fmt.Errorf("INITIATE %v (header %v)", init, h)
			}
			wantTok := `charset=utf-8,username="` + user + `",realm="default",nonce="` + nonce + `",nc=00000001,cnonce="` + cnonce +
				`",digest-uri="/default",maxbuf=65536,response=` + rfc2831(user, "default", pw, nonce, cnonce, "00000001", "/default", false) + `,qop=auth`
			if string(init.Token) != wantTok {
				return fmt.Errorf("digest response\n got %s\nwant %s", init.Token, wantTok)
			}
			if err := s.reply(saslCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_SUCCESS.Enum(),
				Token: []byte("rspauth=" + rfc2831(user, "default", pw, nonce, cnonce, "00000001", "/default", true))}, "", ""); err != nil {
				return err
			}
			h, msgs, err = s.readRequest()
			if err != nil {
				return err
			}
			cc := &pb.IpcConnectionContextProto{}
			if err := proto.Unmarshal(msgs[0], cc); err != nil {
				return err
			}
			if h.GetCallId() != connContextCallID || cc.UserInfo == nil || cc.UserInfo.EffectiveUser != nil || cc.GetProtocol() != testProtocol {
				return fmt.Errorf("connection context %v", cc)
			}
			return nil
		}()
	}()
	c, err := NewConn(context.Background(), cnc, Options{Protocol: testProtocol, User: "ignored", Auth: AuthToken,
		TokenIdentifier: ident, TokenPassword: pass, Rand: fixedRand, ClientID: [16]byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestSaslFatal(t *testing.T) {
	cnc, snc := net.Pipe()
	go func() {
		defer snc.Close()
		s := &fakeServer{nc: snc}
		s.readN(7)
		s.readRequest()
		s.reply(authFailedCallID, pb.RpcResponseHeaderProto_FATAL, nil, "org.apache.hadoop.security.AccessControlException", "TOKEN authentication is not enabled")
	}()
	_, err := NewConn(context.Background(), cnc, Options{Protocol: testProtocol, Auth: AuthToken, TokenIdentifier: []byte{1}, TokenPassword: []byte{2}})
	var re *RemoteError
	if !errors.As(err, &re) || !re.Fatal || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("err = %v, want a fatal AccessControlException matching fs.ErrPermission", err)
	}
}

// echoCall decodes a call's RequestHeaderProto.
func echoCall(msgs [][]byte) (*pb.RequestHeaderProto, error) {
	rh := &pb.RequestHeaderProto{}
	return rh, proto.Unmarshal(msgs[0], rh)
}

func TestOutOfOrderMultiplexing(t *testing.T) {
	const n = 8
	c := pipe(t, Options{}, func(s *fakeServer) error {
		var ids []int32
		for range n {
			h, msgs, err := s.readRequest()
			if err != nil {
				return err
			}
			if _, err := echoCall(msgs); err != nil {
				return err
			}
			ids = append(ids, h.GetCallId())
		}
		for i := len(ids) - 1; i >= 0; i-- { // reply in reverse order, with a ping in between
			s.reply(pingCallID, pb.RpcResponseHeaderProto_SUCCESS, &pb.RpcSaslProto{State: pb.RpcSaslProto_SUCCESS.Enum()}, "", "")
			resp := &pb.GetDelegationTokenResponseProto{Token: &pb.TokenProto{Identifier: []byte{byte(ids[i])}, Password: []byte{}, Kind: proto.String("k"), Service: proto.String("s")}}
			if err := s.reply(ids[i], pb.RpcResponseHeaderProto_SUCCESS, resp, "", ""); err != nil {
				return err
			}
		}
		_, _, err := s.readRequest()
		return err
	})
	type result struct {
		resp *pb.GetDelegationTokenResponseProto
		err  error
	}
	results := make(chan result, n)
	for range n {
		go func() {
			resp := &pb.GetDelegationTokenResponseProto{}
			err := c.Call(context.Background(), "getNewApplication", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, resp)
			results <- result{resp, err}
		}()
	}
	seen := map[byte]bool{}
	for range n {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		seen[r.resp.GetToken().GetIdentifier()[0]] = true
	}
	if len(seen) != n {
		t.Errorf("distinct replies %v, want %d", seen, n)
	}
}

func TestContextCancelKeepsConnection(t *testing.T) {
	c := pipe(t, Options{}, func(s *fakeServer) error {
		h1, _, err := s.readRequest() // never answered in time
		if err != nil {
			return err
		}
		h2, _, err := s.readRequest()
		if err != nil {
			return err
		}
		// The abandoned call's late reply must be discarded.
		s.reply(h1.GetCallId(), pb.RpcResponseHeaderProto_SUCCESS, &pb.GetDelegationTokenResponseProto{}, "", "")
		if err := s.reply(h2.GetCallId(), pb.RpcResponseHeaderProto_ERROR, nil, "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException", "Application with id 'x' doesn't exist in RM."); err != nil {
			return err
		}
		_, _, err = s.readRequest()
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Call(ctx, "getClusterMetrics", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	err = c.Call(context.Background(), "getApplicationReport", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{})
	var re *RemoteError
	if !errors.As(err, &re) || re.Fatal || re.Method != "getApplicationReport" || re.ShortClass() != "ApplicationNotFoundException" {
		t.Fatalf("err = %#v, want a non-fatal ApplicationNotFoundException", err)
	}
	if c.Err() != nil {
		t.Errorf("connection failed: %v", c.Err())
	}
}

func TestFatalClosesConnection(t *testing.T) {
	c := pipe(t, Options{}, func(s *fakeServer) error {
		h, _, err := s.readRequest()
		if err != nil {
			return err
		}
		return s.reply(h.GetCallId(), pb.RpcResponseHeaderProto_FATAL, nil, "org.apache.hadoop.ipc.RpcServerException", "bad header")
	})
	err := c.Call(context.Background(), "getClusterMetrics", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{})
	var re *RemoteError
	if !errors.As(err, &re) || !re.Fatal {
		t.Fatalf("err = %v, want fatal RemoteError", err)
	}
	err2 := c.Call(context.Background(), "getClusterMetrics", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{})
	if !errors.As(err2, &re) {
		t.Fatalf("call after FATAL: %v, want the connection's fatal error", err2)
	}
}

func TestOversizedFrame(t *testing.T) {
	c := pipe(t, Options{MaxFrame: 1024}, func(s *fakeServer) error {
		if _, _, err := s.readRequest(); err != nil {
			return err
		}
		_, err := s.nc.Write([]byte{0x7f, 0xff, 0xff, 0xff})
		return err
	})
	err := c.Call(context.Background(), "getClusterMetrics", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	big := &pb.GetDelegationTokenRequestProto{Renewer: proto.String(strings.Repeat("x", 2048))}
	if err := c.Call(context.Background(), "forceKillApplication", big, &pb.GetDelegationTokenResponseProto{}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized request: err = %v, want ErrFrameTooLarge", err)
	}
}

func TestCloseIdempotentFailsPending(t *testing.T) {
	started := make(chan struct{})
	c := pipe(t, Options{}, func(s *fakeServer) error {
		s.readRequest()
		close(started)
		_, _, err := s.readRequest()
		return err
	})
	errc := make(chan error, 1)
	go func() {
		errc <- c.Call(context.Background(), "getClusterMetrics", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{})
	}()
	<-started
	c.Close()
	c.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call: %v, want ErrClosed", err)
	}
	if err := c.Call(context.Background(), "x", &pb.GetDelegationTokenRequestProto{Renewer: proto.String("rm")}, &pb.GetDelegationTokenResponseProto{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
}
