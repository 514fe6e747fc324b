package sasl

import (
	"bytes"
	"testing"
)

// FuzzUnwrap gives each kind of Layer arbitrary tokens after a few
// genuine ones: none may panic, and a token the client accepts must be
// the server's next message.
func FuzzUnwrap(f *testing.F) {
	for k, tc := range layerCases {
		for before := 0; before < 3; before++ {
			for _, n := range []int{0, 1, 7, 30} {
				s := newTestServer(f, tc.qop, tc.cipher)
				for i := 0; i < before; i++ {
					s.wrap(testMessage(i, 3))
				}
				f.Add(uint8(k), uint8(before), s.wrap(testMessage(9, n)))
			}
		}
	}
	f.Add(uint8(0), uint8(0), []byte{})
	f.Add(uint8(2), uint8(0), bytes.Repeat([]byte{8}, 22))
	f.Fuzz(func(t *testing.T, kind, before uint8, tok []byte) {
		tc := layerCases[int(kind)%len(layerCases)]
		l, s := testLayer(t, tc.qop, tc.cipher)
		for i := 0; i < int(before%3); i++ {
			if _, err := l.Unwrap(s.wrap(testMessage(i, 3))); err != nil {
				t.Fatal(err)
			}
		}
		got, err := l.Unwrap(tok)
		if err != nil {
			// Nothing changed: the server's next message still unwraps.
			if got, err := l.Unwrap(s.wrap([]byte("next"))); err != nil || string(got) != "next" {
				t.Fatalf("after a rejected token: %q, %v", got, err)
			}
			return
		}
		// Only the server's keys make a token that unwraps: it must be
		// the very one the server sends next with that message.
		if want := s.wrap(got); !bytes.Equal(tok, want) {
			t.Fatalf("unwrapped %x from %x, which the server would send as %x", got, tok, want)
		}
	})
}

// FuzzParseChallenge parses arbitrary challenges, with the directives of
// the security layers among the seeds, and answers those it accepts with
// every qop: nothing may panic.
func FuzzParseChallenge(f *testing.F) {
	for _, s := range []string{
		`realm="default",nonce="n",qop="auth",charset=utf-8,algorithm=md5-sess`,
		`realm="default",nonce="n",qop="auth-conf",charset=utf-8,cipher="3des,rc4,des,rc4-56,rc4-40",algorithm=md5-sess`,
		`nonce="n",qop="auth-int,auth-conf",maxbuf=4096,cipher=rc4,algorithm=md5-sess`,
		`nonce="n",qop=auth-conf,maxbuf="27",cipher=" 3des , ",algorithm=md5-sess`,
		`nonce="n\"x",cipher="",maxbuf=16777215,algorithm=md5-sess,cipher="rc4"`,
		`nonce=,cipher=`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseChallenge(b)
		if err != nil {
			return
		}
		if c.MaxBuf < 1 || c.MaxBuf > maxMaxBuf || len(c.QOP) == 0 {
			t.Fatalf("parsed %+v", c)
		}
		for _, prefer := range [][]string{{QOPPrivacy}, {QOPIntegrity}, {QOPAuth}, {QOPPrivacy, QOPIntegrity, QOPAuth}} {
			_, _, l, err := testDigest.Respond(c, prefer)
			if err != nil {
				continue
			}
			if l != nil {
				tok, err := l.Wrap([]byte("m"))
				if err != nil || len(tok) < 16 {
					t.Fatalf("wrap: %x, %v", tok, err)
				}
			}
		}
	})
}
