package dfs_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

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

	tok, err := c.FS.DelegationToken(ctx, os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL"))
	if err != nil {
		t.Fatal(err)
	}
	cr := creds.New()
	cr.Tokens[tok.Service] = tok
	r := dfs.NewSecureResolver(c.Conf, c.User, dfs.Credentials{Tokens: cr})
	defer r.Close()
	check("a delegation token alone", r.Locator())

	if _, err := dfs.NewLocator(c.Conf, c.User).Blocks(ctx, uri); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("simple authentication: %v; want 401", err)
	}
}
