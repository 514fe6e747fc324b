package sasl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/syncbuf"
)

// javaServer is testdata/JavaDigestServer.java running: the JDK's own
// DIGEST-MD5 server, the one Hadoop's NameNode and ResourceManager use.
type javaServer struct {
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncbuf.Buffer
}

func startJava(t *testing.T) *javaServer {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		if os.Getenv("SPINDLE_TEST_HADOOP") == "required" {
			t.Fatalf("SPINDLE_TEST_HADOOP=required but there is no java to check DIGEST-MD5 against: %v", err)
		}
		t.Skipf("no java to check DIGEST-MD5 against: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, java, "testdata/JavaDigestServer.java")
	s := &javaServer{stderr: &syncbuf.Buffer{}}
	cmd.Stderr = s.stderr
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.in.Close()
		cmd.Wait()
		cancel()
	})
	return s
}

// call sends one command and returns the answer's words: its kind, then
// the rest. An "error" answer or another kind than want fails t.
func (s *javaServer) call(t *testing.T, want string, cmd ...string) []string {
	t.Helper()
	if _, err := io.WriteString(s.in, strings.Join(cmd, " ")+"\n"); err != nil {
		t.Fatalf("%s: %v\n%s", cmd[0], err, s.stderr)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd[0], err, s.stderr)
	}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != want {
		t.Fatalf("%s: Java answered %q, want %s\n%s", cmd[0], line, want, s.stderr)
	}
	return f
}

// hexArg is the single hex argument of an answer (empty bytes when none).
func hexArg(t *testing.T, f []string) []byte {
	t.Helper()
	if len(f) < 2 {
		return nil
	}
	b, err := hex.DecodeString(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// handshake runs DIGEST-MD5 against Java for qop, Java's server offering
// exactly that qop; with cipher 3des the challenge's cipher list loses
// rc4, as from a server without it, so that Respond falls back to 3des.
func (s *javaServer) handshake(t *testing.T, qop, cipherName, password string) (Layer, error) {
	t.Helper()
	const user = "c3BpbmRsZS10b2tlbi1pZA==" // as Hadoop's: base64 of a token identifier
	f := s.call(t, "challenge", "start", qop, hex.EncodeToString([]byte(user)), hex.EncodeToString([]byte("cGFzc3dvcmQtYnl0ZXM=")))
	c, err := ParseChallenge(hexArg(t, f))
	if err != nil {
		t.Fatalf("Java's challenge %q: %v", hexArg(t, f), err)
	}
	t.Logf("Java's challenge: %s", hexArg(t, f))
	if !slices.Equal(c.QOP, []string{qop}) || c.Charset != "utf-8" || !slices.Equal(c.Realms, []string{"default"}) {
		t.Fatalf("Java's challenge %+v for qop %s", c, qop)
	}
	if qop == QOPPrivacy {
		if !slices.Contains(c.Ciphers, CipherRC4) || !slices.Contains(c.Ciphers, Cipher3DES) {
			t.Fatalf("Java offers ciphers %v, want rc4 and 3des among them", c.Ciphers)
		}
		if cipherName == Cipher3DES {
			c.Ciphers = slices.DeleteFunc(c.Ciphers, func(x string) bool { return x == CipherRC4 })
		}
	}
	cn := make([]byte, 24)
	rand.Read(cn)
	d := Digest{Username: user, Password: password, DigestURI: "/default", CNonce: base64.StdEncoding.EncodeToString(cn)}
	resp, rspauth, l, err := d.Respond(c, []string{QOPPrivacy, QOPIntegrity, QOPAuth})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), ",qop="+qop) || (cipherName != "") != strings.Contains(string(resp), ",cipher="+cipherName) {
		t.Fatalf("response %s, want qop %s and cipher %q", resp, qop, cipherName)
	}
	if _, err := io.WriteString(s.in, "response "+hex.EncodeToString(resp)+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("response: %v\n%s", err, s.stderr)
	}
	if strings.HasPrefix(line, "error ") {
		return nil, fmt.Errorf("Java: %s", strings.TrimSpace(line[6:]))
	}
	fin := strings.Fields(line)
	if len(fin) == 0 || fin[0] != "rspauth" {
		t.Fatalf("Java answered the response with %q", line)
	}
	if err := VerifyRspAuth(hexArg(t, fin), rspauth); err != nil {
		t.Fatalf("Java's %s: %v", hexArg(t, fin), err)
	}
	neg := s.call(t, "negotiated", "negotiated")
	if len(neg) != 4 || neg[1] != qop || neg[3] != strconv.Itoa(RawSendSize(l)) {
		t.Fatalf("Java negotiated %v; the client has qop %s and RawSendSize %d", neg[1:], qop, RawSendSize(l))
	}
	return l, nil
}

// TestHadoopDigestSecurityLayersWithJava checks the security layers
// against the JDK's DIGEST-MD5 server, which is what Hadoop's servers
// run with hadoop.rpc.protection=integrity or privacy: the handshake
// with the A2 of a security layer, then messages both ways, one at a time
// and in bursts, of sizes around the cipher block and up to what Java
// reports as the raw send size. It runs whenever java is on PATH; with
// SPINDLE_TEST_HADOOP=required it fails without java.
func TestHadoopDigestSecurityLayersWithJava(t *testing.T) {
	s := startJava(t)
	const password = "cGFzc3dvcmQtYnl0ZXM="
	sizes := []int{1, 7, 8, 9, 15, 16, 17, 100, 1000, 5000, 65510} // 65510: the raw send size of auth-conf
	for _, tc := range layerCases {
		t.Run(caseName(tc.qop, tc.cipher), func(t *testing.T) {
			l, err := s.handshake(t, tc.qop, tc.cipher, password)
			if err != nil {
				t.Fatal(err)
			}
			toJava := func(msg []byte) {
				t.Helper()
				tok, err := l.Wrap(msg)
				if err != nil {
					t.Fatal(err)
				}
				if got := hexArg(t, s.call(t, "plain", "unwrap", hex.EncodeToString(tok))); !bytes.Equal(got, msg) {
					t.Fatalf("Java unwrapped %d bytes into %d: %.64x…", len(msg), len(got), got)
				}
			}
			fromJava := func(msg []byte) []byte {
				t.Helper()
				return hexArg(t, s.call(t, "wrapped", "wrap", hex.EncodeToString(msg)))
			}
			unwrap := func(tok, want []byte) {
				t.Helper()
				got, err := l.Unwrap(tok)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Java's message of %d bytes: unwrapped %d bytes, %v", len(want), len(got), err)
				}
			}
			for i, n := range sizes {
				toJava(testMessage(i, n))
				unwrap(fromJava(testMessage(50+i, n)), testMessage(50+i, n))
			}
			// Bursts: three each way before the other side answers.
			var toks [][]byte
			for i := 0; i < 3; i++ {
				toJava(testMessage(200+i, 30+i))
				toks = append(toks, fromJava(testMessage(300+i, 30+i)))
			}
			// A message from Java altered in one byte fails, and changes
			// nothing: the genuine one still unwraps after it.
			bad := append([]byte(nil), toks[0]...)
			bad[len(bad)/2] ^= 0x10
			if got, err := l.Unwrap(bad); err == nil {
				t.Fatalf("altered message from Java unwrapped into %x", got)
			}
			if _, err := l.Unwrap(toks[1]); err == nil {
				t.Fatal("Java's second message unwrapped before its first")
			}
			for i, tok := range toks {
				unwrap(tok, testMessage(300+i, 30+i))
			}
			if _, err := l.Unwrap(toks[2]); err == nil {
				t.Fatal("Java's message unwrapped twice")
			}
			// And the exchange goes on after the failures.
			toJava([]byte("after"))
			unwrap(fromJava([]byte("the end")), []byte("the end"))
		})
	}
	t.Run("wrong-password", func(t *testing.T) {
		_, err := s.handshake(t, QOPPrivacy, CipherRC4, "not-the-password")
		if err == nil || !strings.Contains(err.Error(), "response") {
			t.Fatalf("Java accepted a response made with the wrong password (%v)", err)
		}
		t.Logf("as it should, %v", err)
	})
}
