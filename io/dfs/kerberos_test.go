package dfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
)

// TestKerberosDelegationTokens: on the Kerberos-secured cluster, a
// delegation token obtained with this user as its renewer reaches HDFS;
// renewing it gives an expiry within its maximum date and no earlier than
// it was; once cancelled, the NameNode refuses it, and so does a second
// cancel or renewal.
func TestKerberosDelegationTokens(t *testing.T) {
	c := hadooptest.ConnectKerberos(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := time.Now().Add(-time.Second)
	principal := os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL")
	user, _, _ := strings.Cut(principal, "@")
	tok, err := c.FS.DelegationToken(ctx, principal)
	if err != nil {
		t.Fatal(err)
	}
	d, err := creds.ParseDelegation(tok.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	if d.Owner != principal || d.Renewer != user || d.Issued.Before(before) || !d.Max.After(d.Issued) {
		t.Errorf("token identifier %+v: want owner %s, renewer %s, issued since %v", d, principal, user, before)
	}
	if err := c.TokenRefused(t, tok); err != nil {
		t.Fatalf("a fresh token is refused: %v", err)
	}
	expiry, err := c.FS.RenewDelegationToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !expiry.After(time.Now()) || expiry.After(d.Max) {
		t.Errorf("renewed until %v: want a time after now and no later than the maximum date %v", expiry, d.Max)
	}
	t.Logf("issued %v, renewed until %v, maximum %v", d.Issued.Format(time.RFC3339), expiry.Format(time.RFC3339), d.Max.Format(time.RFC3339))
	if err := c.FS.CancelDelegationToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := c.TokenRefused(t, tok); err == nil {
		t.Error("a cancelled token still reaches HDFS")
	}
	if _, err := c.FS.RenewDelegationToken(ctx, tok); err == nil {
		t.Error("a cancelled token was renewed")
	}
	if err := c.FS.CancelDelegationToken(ctx, tok); err == nil {
		t.Error("a cancelled token was cancelled again")
	}
}

// TestKerberosBlockLocations: on the Kerberos-secured cluster, whose web
// servers ask for Kerberos too, a Resolver's Locator finds where a file's
// blocks are, logged in as the Resolver's HDFS client is: with the
// ticket cache's login (SPNEGO), as ps-submit, and with a delegation
// token alone (WebHDFS's delegation parameter), as an ApplicationMaster
// and its tasks. A Locator with simple authentication is refused.
func TestKerberosBlockLocations(t *testing.T) {
	c := hadooptest.ConnectKerberos(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := c.TempDir(t)
	c.WriteFile(t, dir+"/f", make([]byte, 3<<20), dfs.CreateOptions{BlockSize: 1 << 20})
	uri := c.FS.URI(dir + "/f")

	check := func(what string, l *dfs.Locator) {
		t.Helper()
		blocks, err := l.Blocks(ctx, uri)
		if err != nil || len(blocks) != 3 {
			t.Errorf("%s: %d blocks, %v; want 3", what, len(blocks), err)
			return
		}
		for _, b := range blocks {
			if len(b.Hosts) == 0 {
				t.Errorf("%s: block at %d has no hosts", what, b.Offset)
			}
		}
	}
	check("the ticket cache's login", c.Resolver.Locator())

	r := tokenResolver(ctx, t, c, c.Conf)
	check("a delegation token alone", r.Locator())

	if _, err := dfs.NewLocator(c.Conf, c.User).Blocks(ctx, uri); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("simple authentication: %v; want 401", err)
	}
}

// tokenResolver is a Resolver of the cluster, configured with hc, that
// has no Kerberos login, only a delegation token the test's user
// obtained: as a task's.
func tokenResolver(ctx context.Context, t *testing.T, c *hadooptest.Cluster, hc conf.HadoopConf) *dfs.Resolver {
	t.Helper()
	tok, err := c.FS.DelegationToken(ctx, os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL"))
	if err != nil {
		t.Fatal(err)
	}
	cr := creds.New()
	cr.Tokens[tok.Service] = tok
	r := dfs.NewSecureResolver(hc, c.User, dfs.Credentials{Tokens: cr})
	t.Cleanup(func() { r.Close() })
	return r
}

// withoutSuites is the cluster's file system as a task whose
// configuration leaves out dfs.encrypt.data.transfer.cipher.suites sees it.
func withoutSuites(ctx context.Context, t *testing.T, c *hadooptest.Cluster) dfs.FileSystem {
	t.Helper()
	hc := maps.Clone(c.Conf)
	delete(hc, "dfs.encrypt.data.transfer.cipher.suites")
	fsys, _, err := tokenResolver(ctx, t, c, hc).Resolve(ctx, c.FS.URI("/"))
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// TestKerberosDataTransfer: on the Kerberos-secured cluster, whatever
// its DataNodes' dfs.data.transfer.protection (the CI stages start it
// with authentication, integrity and privacy), a file of several blocks
// and many packets, written by a file system that has read nothing yet,
// reads back byte for byte: whole, from an offset inside its second
// block, and in pieces that span blocks. With a ticket-cache login
// (ps-submit) and with a delegation token alone (a task).
func TestKerberosDataTransfer(t *testing.T) {
	c := hadooptest.ConnectKerberos(t) // its own file system: nothing read yet
	t.Logf("dfs.data.transfer.protection=%s", c.Conf["dfs.data.transfer.protection"])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := c.TempDir(t)
	data := make([]byte, 3<<20+12345)
	rand.New(rand.NewSource(1)).Read(data)

	check := func(what string, fsys dfs.FileSystem) {
		t.Helper()
		name := dir + "/" + strings.ReplaceAll(what, " ", "-")
		for _, f := range []struct {
			name string
			data []byte
		}{{name, data}, {name + ".empty", nil}} {
			w, err := fsys.Create(ctx, f.name, dfs.CreateOptions{BlockSize: 1 << 20})
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if _, err := w.Write(f.data); err != nil {
				t.Fatalf("%s: write %s: %v", what, f.name, err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("%s: close %s: %v", what, f.name, err)
			}
		}
		f, err := fsys.Open(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		got, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes (%v), differing from the %d written", what, len(got), err, len(data))
		}
		off := int64(1<<20 + 777)
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			t.Fatalf("%s: seek: %v", what, err)
		}
		got, err = io.ReadAll(f)
		if err != nil || !bytes.Equal(got, data[off:]) {
			t.Fatalf("%s: from %d read %d bytes (%v), differing from the %d written", what, off, len(got), err, len(data)-int(off))
		}
		piece := make([]byte, 100_000)
		for _, at := range []int64{0, 1<<20 - 50_000, 2<<20 - 1, int64(len(data)) - int64(len(piece))} {
			if _, err := f.ReadAt(piece, at); err != nil || !bytes.Equal(piece, data[at:at+int64(len(piece))]) {
				t.Fatalf("%s: ReadAt %d: %v, or the bytes differ", what, at, err)
			}
		}
		e, err := fsys.Open(ctx, name+".empty")
		if err != nil {
			t.Fatalf("%s: an empty file: %v", what, err)
		}
		defer e.Close()
		if b, err := io.ReadAll(e); err != nil || len(b) != 0 {
			t.Fatalf("%s: an empty file read %d bytes, %v", what, len(b), err)
		}
	}
	check("the ticket cache's login", c.FS)
	// DataNodes at privacy with AES/CTR/NoPadding among their cipher
	// suites stream with AES-CTR once the client offers it (as it does
	// when its own configuration names the suite); else with the SASL
	// layer's cipher.
	// (Where they encrypt every block, dfs.encrypt.data.transfer, the
	// HDFS client's own exchange negotiates AES-CTR.)
	suites := c.Conf["dfs.encrypt.data.transfer.cipher.suites"]
	wantAES := c.Conf["dfs.data.transfer.protection"] == "privacy" && strings.Contains(suites, "AES/CTR/NoPadding") && !c.Encrypts()
	if n := dfs.AESConns(c.FS); (n > 0) != wantAES {
		t.Errorf("%d DataNode connections streamed with AES-CTR, cipher suites %q: want AES-CTR %v", n, suites, wantAES)
	}

	r := tokenResolver(ctx, t, c, c.Conf)
	fsys, _, err := r.Resolve(ctx, c.FS.URI("/"))
	if err != nil {
		t.Fatal(err)
	}
	check("a delegation token alone", fsys)

	if suites != "" && !c.Encrypts() {
		// A client that does not name the suite gets the SASL layer's
		// cipher from the same DataNodes.
		fsys := withoutSuites(ctx, t, c)
		check("no cipher suites", fsys)
		h, ok := fsys.(*dfs.HDFS)
		if !ok {
			t.Fatalf("the resolver gave a %T, not an HDFS", fsys)
		}
		if n := dfs.AESConns(h); n != 0 {
			t.Errorf("%d DataNode connections streamed with AES-CTR without the cipher suites configured", n)
		}
	}
}

// TestKerberosEncryptedTransfer: where the DataNodes encrypt every block
// (dfs.encrypt.data.transfer, with AES), a file system reads what it
// wrote; its NameNode session, whose HDFS client keeps the data
// encryption key it authenticates to DataNodes with, takes no new
// operation once the key is about to expire: the next one goes through a
// new session (a new client, with a new key) and reads and writes, while
// a file opened before reads on. A client whose configuration leaves AES
// out is refused at once.
func TestKerberosEncryptedTransfer(t *testing.T) {
	c := hadooptest.ConnectEncrypted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := c.TempDir(t)
	data := make([]byte, 2<<20+999)
	rand.New(rand.NewSource(2)).Read(data)
	readBack := func(what, name string, want []byte) {
		t.Helper()
		f, err := c.FS.Open(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes (%v), differing from the %d written", what, len(got), err, len(want))
		}
	}

	start := time.Now()
	c.WriteFile(t, dir+"/f", data, dfs.CreateOptions{BlockSize: 1 << 20})
	readBack("first read", dir+"/f", data)
	retire := dfs.RetireAt(c.FS)
	life := time.Duration(600) * time.Minute // dfs.block.access.token.lifetime, in minutes
	if v := c.Conf["dfs.block.access.token.lifetime"]; v != "" {
		m, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("dfs.block.access.token.lifetime %q: %v", v, err)
		}
		life = time.Duration(m) * time.Minute
	}
	if !retire.After(start) || retire.After(time.Now().Add(life)) {
		t.Fatalf("the session retires at %v: want after its start %v and before its key expires, %v from now", retire, start, life)
	}

	early, err := c.FS.Open(ctx, dir+"/f")
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	head := make([]byte, 100_000)
	if _, err := io.ReadFull(early, head); err != nil || !bytes.Equal(head, data[:len(head)]) {
		t.Fatalf("a file opened before the key's expiry: %v, or the bytes differ", err)
	}

	n := dfs.Sessions(c.FS)
	dfs.MoveClock(c.FS, time.Until(retire)+time.Second)
	readBack("a read past the session's retirement", dir+"/f", data)
	if got := dfs.Sessions(c.FS); got != n+1 {
		t.Errorf("%d sessions after the key's expiry, want %d", got, n+1)
	}
	if next := dfs.RetireAt(c.FS); !next.After(retire) {
		t.Errorf("the new session retires at %v, no later than the old one (%v)", next, retire)
	}
	c.WriteFile(t, dir+"/g", data[:12345], dfs.CreateOptions{})
	readBack("a file written by the new session", dir+"/g", data[:12345])
	if rest, err := io.ReadAll(early); err != nil || !bytes.Equal(rest, data[len(head):]) {
		t.Errorf("the file opened on the old session read %d bytes more (%v), differing from the rest", len(rest), err)
	}
	// It read on through the new session, whose key is fresh, and let
	// the old one go.
	if got := dfs.OpenSessions(c.FS); got != 1 {
		t.Errorf("%d sessions open after the early file read on, want 1", got)
	}

	// A writer moves to a new session at its next block once its own
	// has retired.
	w, err := c.FS.Create(ctx, dir+"/h", dfs.CreateOptions{BlockSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(data[:3<<19]); err != nil { // a block and a half
		t.Fatal(err)
	}
	n = dfs.Sessions(c.FS)
	dfs.MoveClock(c.FS, dfs.RetireAt(c.FS).Sub(dfs.Now(c.FS))+time.Second)
	if _, err := w.Write(data[3<<19:]); err != nil {
		t.Fatalf("writing past the session's retirement: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dfs.Sessions(c.FS); got != n+1 {
		t.Errorf("%d sessions after the writer's next block, want %d", got, n+1)
	}
	readBack("a file written across the retirement", dir+"/h", data)

	f, err := withoutSuites(ctx, t, c).Open(ctx, dir+"/f")
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, dfs.ErrProtectedReads) {
		t.Errorf("a client without AES among its cipher suites: %v, want %v", err, dfs.ErrProtectedReads)
	}
}
