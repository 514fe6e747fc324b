package kerberos

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
)

func TestServicePrincipal(t *testing.T) {
	for _, c := range []struct{ setting, addr, spn, realm string }{
		{"nn/_HOST@EXAMPLE.COM", "127.0.0.1:8020", "nn/localhost", "EXAMPLE.COM"},
		{"nn/_HOST@EXAMPLE.COM", "localhost:8020", "nn/localhost", "EXAMPLE.COM"},
		{"rm/rm1.example.com@EXAMPLE.COM", "10.0.0.1:8032", "rm/rm1.example.com", "EXAMPLE.COM"},
		{"spindle/localhost", "localhost:1", "spindle/localhost", ""},
	} {
		spn, realm, err := ServicePrincipal(context.Background(), c.setting, c.addr)
		if err != nil || spn != c.spn || realm != c.realm {
			t.Errorf("ServicePrincipal(%q, %q) = %q, %q, %v; want %q, %q", c.setting, c.addr, spn, realm, err, c.spn, c.realm)
		}
	}
	if _, _, err := ServicePrincipal(context.Background(), " ", "h:1"); err == nil {
		t.Error("an empty principal setting was accepted")
	}
}

func TestNames(t *testing.T) {
	if n, r := SplitPrincipal("nn/host@R.ORG"); n != "nn/host" || r != "R.ORG" {
		t.Errorf("SplitPrincipal: %q %q", n, r)
	}
	for p, want := range map[string]string{"alice@R": "alice", "nn/host@R": "nn", "bob": "bob"} {
		if got := ShortName(p); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", p, got, want)
		}
	}
}

// krb5Conf writes a minimal krb5.conf and returns its path.
func krb5Conf(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "krb5.conf")
	if err := os.WriteFile(p, []byte("[libdefaults]\n  default_realm = EXAMPLE.COM\n[realms]\n  EXAMPLE.COM = {\n    kdc = 127.0.0.1:1\n  }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoginRefusals: every way a login cannot start says which file or
// flag is wrong, and what to do, without touching a KDC.
func TestLoginRefusals(t *testing.T) {
	dir := t.TempDir()
	cfg := krb5Conf(t)
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte{5, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sec  conf.HadoopSecurity
		want []string
	}{
		{"no krb5.conf", conf.HadoopSecurity{Krb5Conf: filepath.Join(dir, "none.conf"), CCache: garbage}, []string{"none.conf", "KRB5_CONFIG"}},
		{"no ticket cache", conf.HadoopSecurity{Krb5Conf: cfg, CCache: filepath.Join(dir, "krb5cc")}, []string{"no ticket cache at " + filepath.Join(dir, "krb5cc"), "kinit"}},
		{"malformed ticket cache", conf.HadoopSecurity{Krb5Conf: cfg, CCache: garbage}, []string{"ticket cache " + garbage}},
		{"keyring cache", conf.HadoopSecurity{Krb5Conf: cfg, CCache: "KEYRING:persistent:0"}, []string{"KEYRING:persistent:0", "only FILE: caches"}},
		{"principal without keytab", conf.HadoopSecurity{Krb5Conf: cfg, Principal: "alice"}, []string{"--principal and --keytab go together"}},
		{"missing keytab", conf.HadoopSecurity{Krb5Conf: cfg, Principal: "alice", Keytab: filepath.Join(dir, "alice.keytab")}, []string{"keytab " + filepath.Join(dir, "alice.keytab")}},
		{"keytab not a keytab", conf.HadoopSecurity{Krb5Conf: cfg, Principal: "alice", Keytab: garbage}, []string{"keytab " + garbage}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := Login(c.sec)
			if err == nil {
				t.Fatalf("logged in as %s", Name(cl))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestExplain(t *testing.T) {
	for msg, want := range map[string]string{
		"KRB Error: (24) KDC_ERR_PREAUTH_FAILED":                                    "wrong or outdated keytab",
		"KRB Error: (31) KRB_AP_ERR_BAD_INTEGRITY Integrity check - PREAUTH_FAILED": "wrong or outdated keytab",
		"KRB Error: (6) KDC_ERR_C_PRINCIPAL_UNKNOWN":                                "does not know this principal",
		"dial tcp 127.0.0.1:88: connect: connection refused":                        "no KDC answered",
	} {
		if got := explain(errString(msg)); !strings.Contains(got, want) || !strings.Contains(got, msg) {
			t.Errorf("explain(%q) = %q, want it to say %q", msg, got, want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// FuzzLoadCCache: a ticket cache is a file anyone may point KRB5CCNAME
// at; reading it must fail, not panic.
func FuzzLoadCCache(f *testing.F) {
	f.Add([]byte{5, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{5, 4, 0, 12, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Add(ccacheBytes(time.Unix(1e9, 0)))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "cc")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cc, err := loadCCache(p)
		if err == nil && cc == nil {
			t.Fatal("no error and no cache")
		}
	})
}

// ccacheBytes builds a version 4 ticket cache for alice@EXAMPLE.COM with
// one ticket-granting ticket valid until end.
func ccacheBytes(end time.Time) []byte {
	be := binary.BigEndian
	var b []byte
	u32 := func(v uint32) { b = be.AppendUint32(b, v) }
	data := func(s string) { u32(uint32(len(s))); b = append(b, s...) }
	principal := func(nameType uint32, realm string, comps ...string) {
		u32(nameType)
		u32(uint32(len(comps)))
		data(realm)
		for _, c := range comps {
			data(c)
		}
	}
	b = append(b, 5, 4, 0, 0) // version 4, no header fields
	principal(1, "EXAMPLE.COM", "alice")
	principal(1, "EXAMPLE.COM", "alice")
	principal(2, "EXAMPLE.COM", "krbtgt", "EXAMPLE.COM")
	b = be.AppendUint16(b, 18) // aes256
	data(strings.Repeat("k", 32))
	for _, ts := range []time.Time{end.Add(-time.Hour), end.Add(-time.Hour), end, end} {
		u32(uint32(ts.Unix()))
	}
	b = append(b, 0, 0, 0, 0, 0) // is_skey, flags
	u32(0)                       // addresses
	u32(0)                       // authorization data
	data("ticket")
	data("")
	return b
}

// TestExpiredTicketCache: a ticket cache whose ticket-granting ticket
// has expired is refused, naming the principal, the file and the time.
func TestExpiredTicketCache(t *testing.T) {
	p := filepath.Join(t.TempDir(), "krb5cc")
	end := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.WriteFile(p, ccacheBytes(end), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Login(conf.HadoopSecurity{Krb5Conf: krb5Conf(t), CCache: p})
	if err == nil {
		t.Fatal("an expired ticket was accepted")
	}
	for _, w := range []string{"alice@EXAMPLE.COM", p, "expired at 2026-01-02T03:04:05Z", "kinit"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	// The same cache still valid gets past the expiry check; its made-up
	// ticket then fails to parse, naming the file.
	if err := os.WriteFile(p, ccacheBytes(time.Now().Add(time.Hour)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = Login(conf.HadoopSecurity{Krb5Conf: krb5Conf(t), CCache: p}); err == nil || strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), p) {
		t.Errorf("valid cache with a made-up ticket: %v", err)
	}
}
