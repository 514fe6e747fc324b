package sasl

import (
	"bytes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rc4"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The tests' server is written here from RFC 2831 §2.3-2.4 alone, the
// plain way, sharing no code with the client's Layer: keys from the
// magic strings, ciphers that keep their own state across messages.

// testDigest and testChallenge are one exchange's inputs.
var testDigest = Digest{Username: "dXNlcg==", Password: "cGFzcw==", DigestURI: "/default", CNonce: "Y2xpZW50bm9uY2U="}

func testChallenge(qop, ciphers string) *Challenge {
	s := `realm="default",nonce="c2VydmVybm9uY2U=",qop="` + qop + `",charset=utf-8,algorithm=md5-sess`
	if ciphers != "" {
		s += `,cipher="` + ciphers + `"`
	}
	c, err := ParseChallenge([]byte(s))
	if err != nil {
		panic(err)
	}
	return c
}

// testHA1 is H(A1) of testDigest and testChallenge, as raw bytes.
func testHA1() []byte {
	y := md5.Sum([]byte("dXNlcg==:default:cGFzcw=="))
	a1 := md5.Sum(append(y[:], ":c2VydmVybm9uY2U=:Y2xpZW50bm9uY2U="...))
	return a1[:]
}

// testServer is the server's end of a security layer.
type testServer struct {
	kic, kis         []byte // signing keys
	enc              func(dst, src []byte)
	dec              func(dst, src []byte)
	block            int // cipher block size; 0 for auth-int
	sendSeq, recvSeq uint32
}

func newTestServer(t testing.TB, qop, cipherName string) *testServer {
	ha1 := testHA1()
	md := func(b []byte, s string) []byte { x := md5.Sum(append(append([]byte(nil), b...), s...)); return x[:] }
	s := &testServer{
		kic: md(ha1, "Digest session key to client-to-server signing key magic constant"),
		kis: md(ha1, "Digest session key to server-to-client signing key magic constant"),
	}
	if qop == QOPIntegrity {
		return s
	}
	kcc := md(ha1, "Digest H(A1) to client-to-server sealing key magic constant")
	kcs := md(ha1, "Digest H(A1) to server-to-client sealing key magic constant")
	switch cipherName {
	case "rc4":
		e, _ := rc4.NewCipher(kcs)
		d, _ := rc4.NewCipher(kcc)
		s.enc, s.dec, s.block = e.XORKeyStream, d.XORKeyStream, 1
	case "3des":
		// K1 from the first 56 bits of the key, K2 from the next 56,
		// bit by bit into the top 7 bits of each byte, odd parity.
		desKeyOf := func(kc []byte, from int) []byte {
			k := make([]byte, 8)
			for j := 0; j < 56; j++ {
				bit := kc[(from+j)/8] >> (7 - uint((from+j)%8)) & 1
				k[j/7] |= bit << (7 - uint(j%7))
			}
			for i := range k {
				ones := 0
				for b := k[i]; b != 0; b >>= 1 {
					ones += int(b & 1)
				}
				if ones%2 == 0 {
					k[i] |= 1
				}
			}
			return k
		}
		mode := func(kc []byte, enc bool) cipher.BlockMode {
			k1, k2 := desKeyOf(kc, 0), desKeyOf(kc, 56)
			b, err := des.NewTripleDESCipher(bytes.Join([][]byte{k1, k2, k1}, nil))
			if err != nil {
				t.Fatal(err)
			}
			if enc {
				return cipher.NewCBCEncrypter(b, kc[8:16]) // keeps its chain across calls
			}
			return cipher.NewCBCDecrypter(b, kc[8:16])
		}
		s.enc, s.dec, s.block = mode(kcs, true).CryptBlocks, mode(kcc, false).CryptBlocks, 8
	default:
		t.Fatalf("cipher %q", cipherName)
	}
	return s
}

func (s *testServer) hmac10(key []byte, seq uint32, msg []byte) []byte {
	h := hmac.New(md5.New, key)
	binary.Write(h, binary.BigEndian, seq)
	h.Write(msg)
	return h.Sum(nil)[:10]
}

// wrap protects msg from the server to the client.
func (s *testServer) wrap(msg []byte) []byte {
	seq := s.sendSeq
	s.sendSeq++
	mac := s.hmac10(s.kis, seq, msg)
	var out []byte
	if s.enc == nil {
		out = append(append([]byte(nil), msg...), mac...)
	} else {
		plain := append([]byte(nil), msg...)
		if s.block > 1 {
			n := s.block - (len(msg)+10)%s.block
			plain = append(plain, bytes.Repeat([]byte{byte(n)}, n)...)
		}
		plain = append(plain, mac...)
		out = make([]byte, len(plain))
		s.enc(out, plain)
	}
	return binary.BigEndian.AppendUint32(append(out, 0, 1), seq)
}

// unwrap checks a message from the client to the server.
func (s *testServer) unwrap(tok []byte) ([]byte, error) {
	if len(tok) < 16 || !bytes.Equal(tok[len(tok)-6:len(tok)-4], []byte{0, 1}) {
		return nil, errors.New("bad trailer")
	}
	seq := binary.BigEndian.Uint32(tok[len(tok)-4:])
	body := tok[:len(tok)-6]
	if s.dec != nil {
		plain := make([]byte, len(body))
		s.dec(plain, body)
		body = plain
	}
	msg, mac := body[:len(body)-10], body[len(body)-10:]
	if s.block > 1 {
		n := int(msg[len(msg)-1])
		if n < 1 || n > s.block || !bytes.Equal(msg[len(msg)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
			return nil, fmt.Errorf("bad padding %x", msg)
		}
		msg = msg[:len(msg)-n]
	}
	if !hmac.Equal(mac, s.hmac10(s.kic, seq, msg)) {
		return nil, errors.New("bad MAC")
	}
	if seq != s.recvSeq {
		return nil, fmt.Errorf("seq %d, want %d", seq, s.recvSeq)
	}
	s.recvSeq++
	return msg, nil
}

// testKD is the response value of RFC 2831 §2.1.2.1 for the test's
// exchange: method "AUTHENTICATE" for the client's, "" for rspauth.
func testKD(method, qop string) string {
	h := func(b []byte) string { x := md5.Sum(b); return hex.EncodeToString(x[:]) }
	a2 := method + ":/default"
	if qop != "auth" {
		a2 += ":00000000000000000000000000000000"
	}
	return h([]byte(hex.EncodeToString(testHA1()) + ":c2VydmVybm9uY2U=:00000001:Y2xpZW50bm9uY2U=:" + qop + ":" + h([]byte(a2))))
}

func testLayer(t testing.TB, qop, cipherName string) (Layer, *testServer) {
	t.Helper()
	ciphers := ""
	if qop == QOPPrivacy {
		ciphers = cipherName
	}
	_, _, l, err := testDigest.Respond(testChallenge(qop, ciphers), []string{qop})
	if err != nil {
		t.Fatal(err)
	}
	return l, newTestServer(t, qop, cipherName)
}

var layerCases = []struct{ qop, cipher string }{
	{QOPIntegrity, ""},
	{QOPPrivacy, CipherRC4},
	{QOPPrivacy, Cipher3DES},
}

func caseName(qop, cipherName string) string { return strings.Trim(qop+"-"+cipherName, "-") }

// testMessage is a message of n bytes that differs from one i to the next.
func testMessage(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return b
}

// TestRespondDigest checks the response and rspauth of auth-int and
// auth-conf against an independent computation, and the directives the
// server needs to set up its end.
func TestRespondDigest(t *testing.T) {
	for _, tc := range []struct{ qop, offered, ciphers, cipher string }{
		{"auth", "auth", "", ""},
		{"auth-int", "auth-int", "", ""},
		{"auth-conf", "auth-conf", "3des,rc4,des,rc4-56,rc4-40", "rc4"},
		{"auth-conf", "auth-conf", "3des,des", "3des"},
	} {
		t.Run(caseName(tc.qop, tc.cipher), func(t *testing.T) {
			resp, rspauth, l, err := testDigest.Respond(testChallenge(tc.offered, tc.ciphers), []string{tc.qop})
			if err != nil {
				t.Fatal(err)
			}
			want := `charset=utf-8,username="dXNlcg==",realm="default",nonce="c2VydmVybm9uY2U=",nc=00000001,cnonce="Y2xpZW50bm9uY2U=",digest-uri="/default",maxbuf=65536,response=` +
				testKD("AUTHENTICATE", tc.qop) + ",qop=" + tc.qop
			if tc.cipher != "" {
				want += ",cipher=" + tc.cipher
			}
			if string(resp) != want {
				t.Errorf("response\n got %s\nwant %s", resp, want)
			}
			if rspauth != testKD("", tc.qop) {
				t.Errorf("rspauth %s, want %s", rspauth, testKD("", tc.qop))
			}
			if (l == nil) != (tc.qop == "auth") {
				t.Errorf("layer %v for qop %s", l, tc.qop)
			}
		})
	}
}

// TestResponseIsRespondAuth checks that Response still answers with qop
// auth, even when the server offers more.
func TestResponseIsRespondAuth(t *testing.T) {
	c := testChallenge("auth-conf,auth-int,auth", "rc4")
	r1, a1, err := testDigest.Response(c)
	if err != nil {
		t.Fatal(err)
	}
	r2, a2, l, err := testDigest.Respond(c, []string{"auth"})
	if err != nil || l != nil || string(r1) != string(r2) || a1 != a2 || !strings.HasSuffix(string(r1), ",qop=auth") {
		t.Fatalf("Response %s %s, Respond %s %s %v %v", r1, a1, r2, a2, l, err)
	}
	if _, _, err := testDigest.Response(testChallenge("auth-int", "")); err == nil || !strings.Contains(err.Error(), "[auth-int]") {
		t.Fatalf("Response to an auth-int only server: %v", err)
	}
}

// TestRespondChooses checks the choice of qop and cipher, and that the
// errors name what each side offers.
func TestRespondChooses(t *testing.T) {
	all := []string{"auth-conf", "auth-int", "auth"}
	for _, tc := range []struct {
		offered, ciphers string
		prefer           []string
		want             string // qop/cipher or the error's words
		fails            bool
	}{
		{"auth,auth-int,auth-conf", "3des,rc4", all, "auth-conf/rc4", false},
		{"auth,auth-int,auth-conf", "3des,rc4", []string{"auth-int", "auth-conf"}, "auth-int/", false},
		{"auth,auth-int", "", all, "auth-int/", false},
		{"auth", "", all, "auth/", false},
		{"auth-conf", "des, 3des", all, "auth-conf/3des", false},
		{"AUTH-CONF", "RC4", all, "auth-conf/rc4", false},
		{"auth-conf", "des,rc4-40", all, "server offers ciphers [des rc4-40]", true},
		{"auth-conf", "", all, "server offers ciphers []", true},
		{"auth-conf,auth-int", "", []string{"auth"}, "server offers qop [auth-conf auth-int], the client accepts [auth]", true},
		{"auth", "", []string{"auth-conf", "auth-int"}, "server offers qop [auth], the client accepts [auth-conf auth-int]", true},
		{"auth", "", nil, "no qop", true},
		{"auth", "", []string{"auth-sth"}, `unknown qop "auth-sth"`, true},
	} {
		resp, _, l, err := testDigest.Respond(testChallenge(tc.offered, tc.ciphers), tc.prefer)
		if tc.fails {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("offered %s/%s, prefer %v: error %v, want one saying %q", tc.offered, tc.ciphers, tc.prefer, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("offered %s/%s, prefer %v: %v", tc.offered, tc.ciphers, tc.prefer, err)
			continue
		}
		d := map[string]string{}
		dirs, _ := parseDirectives(string(resp))
		for _, kv := range dirs {
			d[kv[0]] = kv[1]
		}
		if got := d["qop"] + "/" + d["cipher"]; got != tc.want {
			t.Errorf("offered %s/%s, prefer %v: chose %s, want %s", tc.offered, tc.ciphers, tc.prefer, got, tc.want)
		}
		if (l == nil) != (d["qop"] == "auth") {
			t.Errorf("qop %s with layer %v", d["qop"], l)
		}
	}
}

// TestLayerRoundTrip sends messages both ways, of sizes around the
// cipher's block and in bursts, so that sequence numbers, the RC4 stream
// and the CBC chain all carry over from one message to the next.
func TestLayerRoundTrip(t *testing.T) {
	sizes := []int{1, 0, 5, 6, 7, 8, 9, 15, 16, 17, 100, 1000, 4099}
	for _, tc := range layerCases {
		t.Run(caseName(tc.qop, tc.cipher), func(t *testing.T) {
			l, s := testLayer(t, tc.qop, tc.cipher)
			for i, n := range sizes {
				// A burst of i%3+1 messages each way.
				for k := 0; k <= i%3; k++ {
					msg := testMessage(i+k, n)
					tok, err := l.Wrap(msg)
					if err != nil {
						t.Fatal(err)
					}
					if tc.qop == QOPPrivacy && n > 8 && bytes.Contains(tok, msg) {
						t.Fatalf("message %d appears in clear in %x", i, tok)
					}
					got, err := s.unwrap(tok)
					if err != nil || !bytes.Equal(got, msg) {
						t.Fatalf("client message %d (%d bytes): server unwraps %x, %v", i, n, got, err)
					}
				}
				var toks [][]byte
				for k := 0; k <= i%3; k++ {
					toks = append(toks, s.wrap(testMessage(100+i+k, n)))
				}
				for k, tok := range toks {
					got, err := l.Unwrap(tok)
					if err != nil || !bytes.Equal(got, testMessage(100+i+k, n)) {
						t.Fatalf("server message %d.%d (%d bytes): client unwraps %x, %v", i, k, n, got, err)
					}
				}
			}
		})
	}
}

// TestLayerRejects alters each byte of a server's message in turn,
// replays messages and reorders them: each must fail, and change nothing,
// so that the genuine next message still unwraps.
func TestLayerRejects(t *testing.T) {
	for _, tc := range layerCases {
		t.Run(caseName(tc.qop, tc.cipher), func(t *testing.T) {
			l, s := testLayer(t, tc.qop, tc.cipher)
			unwrap := func(tok []byte, want []byte) {
				t.Helper()
				got, err := l.Unwrap(tok)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("unwrap %x: %x, %v", tok, got, err)
				}
			}
			m0, m1, m2 := testMessage(0, 21), testMessage(1, 13), testMessage(2, 40)
			t0 := s.wrap(m0)
			for i := range t0 {
				for _, flip := range []byte{0x01, 0x80} {
					bad := append([]byte(nil), t0...)
					bad[i] ^= flip
					if got, err := l.Unwrap(bad); err == nil {
						t.Fatalf("byte %d ^ %#x altered: unwrapped %x", i, flip, got)
					}
				}
			}
			for _, bad := range [][]byte{nil, t0[:15], t0[:len(t0)-1], append(t0[:len(t0):len(t0)], 0)} {
				if got, err := l.Unwrap(bad); err == nil {
					t.Fatalf("%d of %d bytes: unwrapped %x", len(bad), len(t0), got)
				}
			}
			unwrap(t0, m0)
			if _, err := l.Unwrap(t0); err == nil || (tc.qop == QOPIntegrity && !strings.Contains(err.Error(), "sequence number 0, want 1")) {
				t.Fatalf("replayed message: %v", err)
			}
			t1, t2 := s.wrap(m1), s.wrap(m2)
			if _, err := l.Unwrap(t2); err == nil {
				t.Fatal("message 2 before message 1 unwrapped")
			}
			unwrap(t1, m1)
			unwrap(t2, m2)
			if _, err := l.Unwrap(t1); err == nil {
				t.Fatal("message 1 replayed after 2 unwrapped")
			}
			// The client's messages are for the server: one of the
			// server's own, with its keys, is not accepted back.
			if got, err := l.Unwrap(mustWrap(t, l, m0)); err == nil {
				t.Fatalf("the client's own message unwrapped as the server's: %x", got)
			}
		})
	}
}

func mustWrap(t testing.TB, l Layer, msg []byte) []byte {
	t.Helper()
	tok, err := l.Wrap(msg)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestLayerWrapFormat checks the sizes of wrapped messages: MAC and
// trailer, and for 3des the padding to whole blocks.
func TestLayerWrapFormat(t *testing.T) {
	for _, tc := range []struct {
		qop, cipher string
		n, want     int
	}{
		{QOPIntegrity, "", 0, 16}, {QOPIntegrity, "", 100, 116},
		{QOPPrivacy, CipherRC4, 0, 16}, {QOPPrivacy, CipherRC4, 100, 116},
		{QOPPrivacy, Cipher3DES, 0, 16 + 6}, {QOPPrivacy, Cipher3DES, 5, 16 + 6},
		{QOPPrivacy, Cipher3DES, 6, 24 + 6}, {QOPPrivacy, Cipher3DES, 13, 24 + 6}, {QOPPrivacy, Cipher3DES, 14, 32 + 6},
	} {
		l, _ := testLayer(t, tc.qop, tc.cipher)
		for seq := uint32(0); seq < 2; seq++ {
			tok := mustWrap(t, l, testMessage(0, tc.n))
			if len(tok) != tc.want || !bytes.Equal(tok[len(tok)-6:], []byte{0, 1, 0, 0, 0, byte(seq)}) {
				t.Errorf("%s %s: %d bytes wrapped into %x (%d bytes), want %d ending in 0001%08x", tc.qop, tc.cipher, tc.n, tok, len(tok), tc.want, seq)
			}
		}
	}
}

func TestRawSendSize(t *testing.T) {
	c := testChallenge("auth-int,auth-conf", "rc4")
	for _, tc := range []struct {
		qop    string
		maxbuf int
		want   int
	}{{"auth-int", 65536, 65520}, {"auth-conf", 65536, 65510}, {"auth-int", 1000, 984}, {"auth-conf", 27, 1}} {
		c.MaxBuf = tc.maxbuf
		_, _, l, err := testDigest.Respond(c, []string{tc.qop})
		if err != nil {
			t.Fatal(err)
		}
		if got := RawSendSize(l); got != tc.want {
			t.Errorf("%s, maxbuf %d: RawSendSize %d, want %d", tc.qop, tc.maxbuf, got, tc.want)
		}
	}
	c.MaxBuf = 26
	if _, _, _, err := testDigest.Respond(c, []string{"auth-conf"}); err == nil {
		t.Error("auth-conf with maxbuf 26 accepted")
	}
	if RawSendSize(nil) != 0 {
		t.Error("RawSendSize(nil) != 0")
	}
}

func TestParseChallengeSecurityDirectives(t *testing.T) {
	c, err := ParseChallenge([]byte(`realm="default",nonce="n",qop="auth-conf,auth-int",charset=utf-8,maxbuf="4096",cipher="3des,rc4,des,rc4-56,rc4-40",algorithm=md5-sess`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.QOP, c.Ciphers, c.MaxBuf) != "[auth-conf auth-int] [3des rc4 des rc4-56 rc4-40] 4096" {
		t.Errorf("parsed %+v", c)
	}
	c, err = ParseChallenge([]byte(`nonce="n",cipher=" rc4 , 3des ",algorithm=md5-sess`))
	if err != nil || fmt.Sprint(c.QOP, c.Ciphers, c.MaxBuf) != "[auth] [rc4 3des] 65536" {
		t.Errorf("parsed %+v, %v", c, err)
	}
	for _, bad := range []string{`maxbuf=0`, `maxbuf=16777216`, `maxbuf=+5`, `maxbuf=12x`, `maxbuf=`, `maxbuf=100,maxbuf=100`} {
		if c, err := ParseChallenge([]byte(`nonce="n",algorithm=md5-sess,` + bad)); err == nil {
			t.Errorf("%s: parsed %+v", bad, c)
		}
	}
}

// TestDESKey checks the widening of 7 key bytes into a DES key
// with parity against values worked out by hand: the 56 bits go 7 at a
// time into the top of each byte, whose low bit makes the count of ones
// odd.
func TestDESKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"00000000000000", "0101010101010101"},
		{"ffffffffffffff", "fefefefefefefefe"},
		{"80000000000000", "8001010101010101"},
		{"00000000000001", "0101010101010102"},
		{"fe000000000000", "fe01010101010101"},
	} {
		in, _ := hex.DecodeString(tc.in)
		if got := desKey(in); hex.EncodeToString(got[:]) != tc.want {
			t.Errorf("desKey(%s) = %x, want %s", tc.in, got, tc.want)
		}
	}
}

// TestLayerWrapWhileUnwrap runs Wrap and Unwrap at the same time, as a
// connection's writer and reader do (run with -race).
func TestLayerWrapWhileUnwrap(t *testing.T) {
	for _, tc := range layerCases {
		l, s := testLayer(t, tc.qop, tc.cipher)
		var fromServer [][]byte
		for i := 0; i < 50; i++ {
			fromServer = append(fromServer, s.wrap(testMessage(i, i)))
		}
		done := make(chan [][]byte, 1)
		go func() {
			var toks [][]byte
			for i := 0; i < 50; i++ {
				tok, err := l.Wrap(testMessage(i, 2*i))
				if err != nil {
					t.Error(err)
				}
				toks = append(toks, tok)
			}
			done <- toks
		}()
		for i, tok := range fromServer {
			if got, err := l.Unwrap(tok); err != nil || !bytes.Equal(got, testMessage(i, i)) {
				t.Fatalf("%s %s: message %d: %x, %v", tc.qop, tc.cipher, i, got, err)
			}
		}
		for i, tok := range <-done {
			if got, err := s.unwrap(tok); err != nil || !bytes.Equal(got, testMessage(i, 2*i)) {
				t.Fatalf("%s %s: client message %d: %x, %v", tc.qop, tc.cipher, i, got, err)
			}
		}
	}
}
