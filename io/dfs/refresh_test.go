package dfs

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
)

// hdfsToken is a delegation token of owner for the NameNode at
// 127.0.0.1:8020, its sequence number seq.
func hdfsToken(owner string, seq byte) creds.Token {
	id := []byte{0}
	for _, s := range []string{owner, "rm", ""} {
		id = append(creds.AppendVLong(id, int64(len(s))), s...)
	}
	for _, v := range []int64{1795610745099, 1796215545099, int64(seq), 1} {
		id = creds.AppendVLong(id, v)
	}
	return creds.Token{Identifier: id, Password: []byte{seq}, Kind: creds.KindHDFSDelegation, Service: "127.0.0.1:8020"}
}

// tokensFile is a credentials file holding tok and announcing the next
// tokens in file uri at next.
func tokensFile(tok creds.Token, uri string, next time.Time) *creds.Credentials {
	c := creds.New()
	c.Tokens[tok.Service] = tok
	SetRefresh(c, TokenRefresh{URI: uri, Next: next})
	return c
}

// TestResolverKeepsTokens: a Resolver whose credentials announce newer
// delegation tokens reads them from the file named, once they are due,
// and the file systems it resolved take them for their next NameNode
// connections. A file with nothing newer is read again until it has, and
// an error says why in the meantime.
func TestResolverKeepsTokens(t *testing.T) {
	defer func(a, b, c time.Duration) { refreshRetryMin, refreshRetryMax, refreshSpread = a, b, c }(refreshRetryMin, refreshRetryMax, refreshSpread)
	refreshRetryMin, refreshRetryMax, refreshSpread = 10*time.Millisecond, 50*time.Millisecond, time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "tokens")
	uri := "file://" + path
	due := time.Now().Add(-time.Second)
	first := tokensFile(hdfsToken("alice", 1), uri, due)
	// The file holds, to begin with, what the task already has.
	if err := first.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	hc := conf.HadoopConf{"fs.defaultFS": "hdfs://127.0.0.1:8020", "hadoop.security.authentication": "kerberos",
		"dfs.namenode.kerberos.principal": "nn/_HOST@EXAMPLE.COM"}
	r := NewSecureResolver(hc, "", Credentials{Tokens: first})
	defer r.Close()
	type event struct {
		next time.Time
		err  error
	}
	events := make(chan event, 100)
	r.OnTokens(func(next time.Time, err error) { events <- event{next, err} })
	fsys, _, err := r.Resolve(ctx, "hdfs:///data")
	if err != nil {
		t.Fatal(err)
	}
	h := fsys.(*HDFS)
	if got := h.token.Load().Password; got[0] != 1 {
		t.Fatalf("the file system starts with token %d, want 1", got[0])
	}
	wait := func() event {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-ctx.Done():
			t.Fatal("no attempt to read the newer tokens within a minute")
			return event{}
		}
	}
	e := wait()
	if e.err == nil || !strings.Contains(e.err.Error(), "no tokens newer") || !e.next.Equal(due.Truncate(time.Millisecond)) {
		t.Fatalf("a file with nothing newer: next %v, error %v", e.next, e.err)
	}
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := tokensFile(hdfsToken("alice", 2), uri, later).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for e = wait(); e.err != nil; e = wait() {
	}
	if !e.next.Equal(later) {
		t.Errorf("next tokens announced for %v, want %v", e.next, later)
	}
	if got := h.token.Load().Password; got[0] != 2 {
		t.Errorf("the file system resolved before has token %d, want 2", got[0])
	}
	r.mu.Lock()
	got := r.creds.Tokens.Tokens["127.0.0.1:8020"].Password[0]
	r.mu.Unlock()
	if got != 2 {
		t.Errorf("the Resolver's own tokens: %d, want 2", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.SetTokens(ctx, first); err == nil {
		t.Error("SetTokens after Close succeeded")
	}
}

// TestSetToken: a file system takes a newer token of the same owner
// only, and only when it authenticates with tokens.
func TestSetToken(t *testing.T) {
	tok := hdfsToken("alice", 1)
	h, err := NewHDFS(HDFSOptions{Authority: "127.0.0.1:8020", Namenodes: []string{"127.0.0.1:8020"}, Kerberos: true, Token: &tok})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetToken(hdfsToken("mallory", 2)); err == nil || !strings.Contains(err.Error(), "mallory") {
		t.Errorf("a token of another owner: %v", err)
	}
	if err := h.SetToken(creds.Token{Identifier: []byte{9}}); err == nil {
		t.Error("a malformed token accepted")
	}
	if err := h.SetToken(hdfsToken("alice", 3)); err != nil || h.token.Load().Password[0] != 3 {
		t.Errorf("a newer token of the same owner: %v", err)
	}
	plain, err := NewHDFS(HDFSOptions{Authority: "127.0.0.1:8020", Namenodes: []string{"127.0.0.1:8020"}, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.SetToken(tok); err == nil {
		t.Error("a file system without tokens took one")
	}
}

// TestRefreshOf: the announcement is read back as written, and a file
// without one, or with a bad time, announces nothing.
func TestRefreshOf(t *testing.T) {
	at := time.UnixMilli(1795610745099)
	c := tokensFile(hdfsToken("alice", 1), "hdfs://nn:8020/user/alice/.spindle/app/tokens", at)
	if r, ok := RefreshOf(c); !ok || r.URI != "hdfs://nn:8020/user/alice/.spindle/app/tokens" || !r.Next.Equal(at) {
		t.Errorf("got %+v %v", r, ok)
	}
	for _, next := range []string{"", "soon", "-5", "0"} {
		c.Secrets[TokensNextSecret] = []byte(next)
		if r, ok := RefreshOf(c); ok {
			t.Errorf("next %q: %+v", next, r)
		}
	}
	if _, ok := RefreshOf(creds.New()); ok {
		t.Error("empty credentials announce tokens")
	}
	if _, ok := RefreshOf(nil); ok {
		t.Error("no credentials announce tokens")
	}
}
