package dfs

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
)

// TestLocatorWithADelegationToken: for a Kerberos-secured HDFS, a
// Resolver's Locator asks WebHDFS with the Resolver's delegation token of
// that HDFS (the delegation parameter, without user.name), and with the
// newer one once the Resolver has it; a Locator of a plain HDFS asks as
// the user.
func TestLocatorWithADelegationToken(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		w.Write([]byte(`{"BlockLocations":{"BlockLocation":[{"topologyPaths":["/r/127.0.0.1:9866"],"names":["127.0.0.1:9866"],"offset":0,"hosts":["127.0.0.1"],"length":10}]}}`))
	}))
	defer srv.Close()
	web := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hc := conf.HadoopConf{"fs.defaultFS": "hdfs://127.0.0.1:8020", "hadoop.security.authentication": "kerberos",
		"dfs.namenode.kerberos.principal": "nn/_HOST@EXAMPLE.COM", "dfs.namenode.http-address": web}
	first := creds.New()
	first.Tokens["nn"] = hdfsToken("alice@EXAMPLE.COM", 1)
	r := NewSecureResolver(hc, "alice", Credentials{Tokens: first})
	defer r.Close()
	l := r.Locator()
	blocks := func() url.Values {
		t.Helper()
		if b, err := l.Blocks(ctx, "hdfs:///data/f"); err != nil || len(b) != 1 {
			t.Fatalf("Blocks: %+v, %v", b, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return queries[len(queries)-1]
	}
	sent := func(q url.Values) []byte {
		t.Helper()
		tok, err := creds.DecodeURLString(q.Get("delegation"))
		if err != nil {
			t.Fatalf("the delegation parameter %q: %v", q.Get("delegation"), err)
		}
		if q.Has("user.name") {
			t.Errorf("user.name=%s sent with the token", q.Get("user.name"))
		}
		return tok.Password
	}
	if got := sent(blocks()); !bytes.Equal(got, []byte{1}) {
		t.Errorf("token %v sent, want the first (1)", got)
	}
	newer := creds.New()
	newer.Tokens["nn"] = hdfsToken("alice@EXAMPLE.COM", 2)
	if err := r.SetTokens(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if got := sent(blocks()); !bytes.Equal(got, []byte{2}) {
		t.Errorf("token %v sent after SetTokens, want the newer (2)", got)
	}

	plain := NewResolver(conf.HadoopConf{"fs.defaultFS": "hdfs://127.0.0.1:8020", "dfs.namenode.http-address": web}, "bob")
	defer plain.Close()
	l = plain.Locator()
	if q := blocks(); q.Get("user.name") != "bob" || q.Has("delegation") {
		t.Errorf("a plain HDFS's query %v; want user.name=bob and no token", q)
	}
}
