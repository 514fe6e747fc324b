package dfs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
)

// TestTokenFor: a file system takes the HDFS delegation token whose
// service names it (its nameservice, or a NameNode as host:port or
// ip:port), never another file system's or another kind's.
func TestTokenFor(t *testing.T) {
	cr := creds.New()
	cr.Tokens["a"] = creds.Token{Identifier: []byte("nn"), Kind: creds.KindHDFSDelegation, Service: "127.0.0.1:8020"}
	cr.Tokens["b"] = creds.Token{Identifier: []byte("ha"), Kind: creds.KindHDFSDelegation, Service: "ha-hdfs:ns1"}
	cr.Tokens["c"] = creds.Token{Identifier: []byte("rm"), Kind: creds.KindRMDelegation, Service: "127.0.0.1:8032"}
	c := Credentials{Tokens: cr}
	ctx := context.Background()
	for _, tc := range []struct {
		o    HDFSOptions
		want string // identifier; "" for none
	}{
		{HDFSOptions{Authority: "localhost:8020", Namenodes: []string{"localhost:8020"}}, "nn"},
		{HDFSOptions{Authority: "127.0.0.1:8020", Namenodes: []string{"127.0.0.1:8020"}}, "nn"},
		{HDFSOptions{Authority: "ns1", Namenodes: []string{"nn1.example.com:8020", "nn2.example.com:8020"}}, "ha"},
		{HDFSOptions{Authority: "localhost:8032", Namenodes: []string{"localhost:8032"}}, ""},
		{HDFSOptions{Authority: "other:9000", Namenodes: []string{"other.invalid:9000"}}, ""},
	} {
		tok, ok := c.tokenFor(ctx, tc.o)
		if got := string(tok.Identifier); ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s: token %q (%v), want %q", tc.o.Authority, got, ok, tc.want)
		}
	}
	if _, ok := (Credentials{}).tokenFor(ctx, HDFSOptions{Authority: "localhost:8020", Namenodes: []string{"localhost:8020"}}); ok {
		t.Error("a token found in no credentials")
	}
}

// TestLoadCredentials: a container's credentials file with an HDFS
// token is used as is; one without (an AM's with only its own token) or
// none at all means logging in, and without a ticket the error says how.
func TestLoadCredentials(t *testing.T) {
	dir := t.TempDir()
	withHDFS, withoutHDFS := filepath.Join(dir, "with"), filepath.Join(dir, "without")
	cr := creds.New()
	cr.Tokens["am"] = creds.Token{Identifier: []byte{1}, Password: []byte{2}, Kind: creds.KindAMRMToken, Service: "rm:8030"}
	if err := cr.WriteFile(withoutHDFS); err != nil {
		t.Fatal(err)
	}
	cr.Tokens["nn"] = creds.Token{Identifier: []byte{3}, Password: []byte{4}, Kind: creds.KindHDFSDelegation, Service: "127.0.0.1:8020"}
	if err := cr.WriteFile(withHDFS); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCredentials(conf.HadoopSecurity{Kerberos: true, TokenFile: withHDFS})
	if err != nil || c.Tokens == nil || c.Login != nil {
		t.Fatalf("with an HDFS token: %+v, %v", c, err)
	}
	for _, file := range []string{withoutHDFS, ""} {
		_, err := LoadCredentials(conf.HadoopSecurity{Kerberos: true, TokenFile: file, CCache: filepath.Join(dir, "cc"), Krb5Conf: filepath.Join(dir, "krb5.conf")})
		if err == nil || !strings.Contains(err.Error(), "krb5.conf") {
			t.Errorf("token file %q, no krb5.conf: %v", file, err)
		}
	}
	if _, err := LoadCredentials(conf.HadoopSecurity{Kerberos: true, TokenFile: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing credentials file: %v", err)
	}
}

// TestProtectedReads: the DataNodes of an HDFS that sign or encrypt what
// they send (dfs.data.transfer.protection integrity or privacy, without
// dfs.encrypt.data.transfer) are reached through this package's SASL
// layer, with the qualities of protection the setting allows; the other
// settings leave the DataNode exchange to the HDFS client, and with
// dfs.encrypt.data.transfer but no AES cipher suite opening a file fails
// at once, before any call, with ErrProtectedReads naming the file.
func TestProtectedReads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		protection, encrypt, suites string
		want                        []string
		refused                     bool
	}{
		{"integrity", "", "", []string{"auth-int", "auth-conf"}, false},
		{"authentication,privacy", "", "", []string{"auth-conf"}, false},
		{"authentication", "", "", nil, false},
		{"", "", "", nil, false},
		{"privacy", "true", "", nil, true},
		{"", "true", "AES/CTR/NoPadding", nil, false},
	} {
		name := fmt.Sprintf("protection %q, encrypt %q, suites %q", tc.protection, tc.encrypt, tc.suites)
		hc := conf.HadoopConf{"fs.defaultFS": "hdfs://127.0.0.1:1", "dfs.data.transfer.protection": tc.protection,
			"dfs.encrypt.data.transfer": tc.encrypt, "dfs.encrypt.data.transfer.cipher.suites": tc.suites,
			"ipc.client.connect.timeout": "100", "ipc.client.connect.max.retries": "0"}
		o, err := HDFSOptionsFromConf(hc, "", "alice")
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHDFS(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.saslQOPs; strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: DataNode connections accept %v, want %v", name, got, tc.want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = h.Open(ctx, "/data/f")
		cancel()
		h.Close()
		if refused := errors.Is(err, ErrProtectedReads); refused != tc.refused {
			t.Errorf("%s: Open: %v; refused %v, want %v", name, err, refused, tc.refused)
		}
		if tc.refused && !strings.Contains(err.Error(), "hdfs://127.0.0.1:1/data/f") {
			t.Errorf("the refusal does not name the file: %v", err)
		}
	}
}
