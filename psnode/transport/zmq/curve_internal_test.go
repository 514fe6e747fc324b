package zmq

import (
	"io"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestZAPReply checks the answers to ZAP requests, malformed ones among
// them: only a CURVE client with the job's key is accepted.
func TestZAPReply(t *testing.T) {
	c, err := DeriveCurve([]byte("s"))
	if err != nil {
		t.Fatal(err)
	}
	l := logrus.New()
	l.Out = io.Discard
	tr := &Transport{opts: Options{Curve: c}, log: logrus.NewEntry(l)}
	req := func(mech string, cred []byte) [][]byte {
		r := [][]byte{[]byte("1.0"), []byte("id"), []byte("spindle"), []byte("127.0.0.1"), nil, []byte(mech)}
		if cred != nil {
			r = append(r, cred)
		}
		return r
	}
	other := c.ServerPublic
	for _, tc := range []struct {
		name string
		req  [][]byte
		want string
	}{
		{"job key", req("CURVE", c.ClientPublic[:]), "200"},
		{"other key", req("CURVE", other[:]), "400"},
		{"short key", req("CURVE", c.ClientPublic[:31]), "400"},
		{"no key", req("CURVE", nil), "400"},
		{"null", req("NULL", nil), "400"},
		{"plain", req("PLAIN", []byte("user")), "400"},
		{"bad version", append([][]byte{[]byte("2.0")}, req("CURVE", c.ClientPublic[:])[1:]...), "400"},
		{"empty", nil, "400"},
		{"one frame", [][]byte{[]byte("1.0")}, "400"},
	} {
		got := tr.zapReply(tc.req)
		if len(got) != 6 || got[0] != "1.0" || got[2] != tc.want {
			t.Errorf("%s: reply %q, want status %s", tc.name, got, tc.want)
		}
	}
}

func FuzzZAPReply(f *testing.F) {
	c, err := DeriveCurve([]byte("s"))
	if err != nil {
		f.Fatal(err)
	}
	l := logrus.New()
	l.Out = io.Discard
	tr := &Transport{opts: Options{Curve: c}, log: logrus.NewEntry(l)}
	f.Add([]byte("1.0"), []byte("CURVE"), c.ClientPublic[:], 7)
	f.Fuzz(func(t *testing.T, version, mech, cred []byte, n int) {
		r := [][]byte{version, []byte("id"), nil, nil, nil, mech, cred}
		if n >= 0 && n < len(r) {
			r = r[:n]
		}
		got := tr.zapReply(r)
		if len(got) != 6 {
			t.Fatalf("reply %q", got)
		}
		if got[2] == "200" && string(cred) != string(c.ClientPublic[:]) {
			t.Fatalf("accepted %x", cred)
		}
	})
}
