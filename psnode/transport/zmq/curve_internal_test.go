package zmq

import (
	"io"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestZAPReply checks the answers to ZAP requests, malformed ones among
// them: only a CURVE client with the job's key is accepted on the CURVE
// route, and only a PLAIN client with the route's password on the sealed
// one.
func TestZAPReply(t *testing.T) {
	c, err := DeriveCurve([]byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	pass, err := sealedPassword(c)
	if err != nil {
		t.Fatal(err)
	}
	other, err := DeriveCurve([]byte("a guess"))
	if err != nil {
		t.Fatal(err)
	}
	otherPass, err := sealedPassword(other)
	if err != nil {
		t.Fatal(err)
	}
	l := logrus.New()
	l.Out = io.Discard
	tr := &Transport{opts: Options{Curve: c}, log: logrus.NewEntry(l)}
	reqIn := func(domain, mech string, cred ...[]byte) [][]byte {
		r := [][]byte{[]byte("1.0"), []byte("id"), []byte(domain), []byte("127.0.0.1"), nil, []byte(mech)}
		return append(r, cred...)
	}
	req := func(mech string, cred ...[]byte) [][]byte { return reqIn(zapDomain, mech, cred...) }
	plain := func(user string, pass []byte) [][]byte {
		return reqIn(sealedDomain, "PLAIN", []byte(user), pass)
	}
	refused := 0
	for _, tc := range []struct {
		name string
		req  [][]byte
		want string
	}{
		{"job key", req("CURVE", c.ClientPublic[:]), "200"},
		{"other key", req("CURVE", other.ClientPublic[:]), "400"},
		{"server key", req("CURVE", c.ServerPublic[:]), "400"},
		{"short key", req("CURVE", c.ClientPublic[:31]), "400"},
		{"no key", req("CURVE"), "400"},
		{"null", req("NULL"), "400"},
		{"plain", req("PLAIN", []byte("user")), "400"},
		{"plain with the password on the CURVE route", req("PLAIN", []byte(sealedUser), pass), "400"},
		{"bad version", append([][]byte{[]byte("2.0")}, req("CURVE", c.ClientPublic[:])[1:]...), "400"},
		{"empty", nil, "400"},
		{"one frame", [][]byte{[]byte("1.0")}, "400"},
		{"sealed: password", plain(sealedUser, pass), "200"},
		{"sealed: another job's password", plain(sealedUser, otherPass), "400"},
		{"sealed: short password", plain(sealedUser, pass[:31]), "400"},
		{"sealed: other user", plain("root", pass), "400"},
		{"sealed: no password", reqIn(sealedDomain, "PLAIN", []byte(sealedUser)), "400"},
		{"sealed: CURVE key", reqIn(sealedDomain, "CURVE", c.ClientPublic[:]), "400"},
		{"sealed: null", reqIn(sealedDomain, "NULL"), "400"},
		{"unknown domain", reqIn("", "CURVE", c.ClientPublic[:]), "400"},
	} {
		got := tr.zapReply(tc.req)
		if len(got) != 6 || got[0] != "1.0" || got[2] != tc.want {
			t.Errorf("%s: reply %q, want status %s", tc.name, got, tc.want)
		}
		if tc.want != "200" {
			refused++
		}
	}
	if got := tr.Stats().Refused; got != uint64(refused) {
		t.Errorf("Stats().Refused = %d, want %d", got, refused)
	}
}

func FuzzZAPReply(f *testing.F) {
	c, err := DeriveCurve([]byte("s"))
	if err != nil {
		f.Fatal(err)
	}
	pass, err := sealedPassword(c)
	if err != nil {
		f.Fatal(err)
	}
	l := logrus.New()
	l.Out = io.Discard
	tr := &Transport{opts: Options{Curve: c}, log: logrus.NewEntry(l)}
	f.Add([]byte("1.0"), []byte(zapDomain), []byte("CURVE"), c.ClientPublic[:], []byte(nil), 7)
	f.Add([]byte("1.0"), []byte(sealedDomain), []byte("PLAIN"), []byte(sealedUser), pass, 8)
	f.Fuzz(func(t *testing.T, version, domain, mech, cred, cred2 []byte, n int) {
		r := [][]byte{version, []byte("id"), domain, nil, nil, mech, cred, cred2}
		if n >= 0 && n < len(r) {
			r = r[:n]
		}
		got := tr.zapReply(r)
		if len(got) != 6 {
			t.Fatalf("reply %q", got)
		}
		if got[2] != "200" {
			return
		}
		curve := string(domain) == zapDomain && string(cred) == string(c.ClientPublic[:])
		sealed := string(domain) == sealedDomain && string(cred) == sealedUser && string(cred2) == string(pass)
		if !curve && !sealed {
			t.Fatalf("accepted %q in domain %q", r[5:], domain)
		}
	})
}
