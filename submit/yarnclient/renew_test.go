package yarnclient

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
)

// delegationToken is a token of kind for service, issued at issued and
// renewable until max.
func delegationToken(kind, service string, issued, max time.Time) creds.Token {
	id := []byte{0}
	for _, s := range []string{"alice@EXAMPLE.COM", "rm", ""} {
		id = append(creds.AppendVLong(id, int64(len(s))), s...)
	}
	for _, v := range []int64{issued.UnixMilli(), max.UnixMilli(), 1, 1} {
		id = creds.AppendVLong(id, v)
	}
	return creds.Token{Identifier: id, Password: []byte("pw"), Kind: kind, Service: service}
}

func quiet() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// TestTokenKeeperStart: the keeper plans its first tokens three quarters
// of the way to the first maximum date among the HDFS tokens ps-submit
// obtained, and every container gets those tokens with that plan and the
// file it will write, which the tasks' Resolver reads back.
func TestTokenKeeperStart(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	start := creds.New()
	start.Tokens["127.0.0.1:8020"] = delegationToken(creds.KindHDFSDelegation, "127.0.0.1:8020", now, now.Add(8*time.Hour))
	start.Tokens["ha-hdfs:ns1"] = delegationToken(creds.KindHDFSDelegation, "ha-hdfs:ns1", now, now.Add(4*time.Hour))
	// Not an HDFS token: it does not count.
	start.Tokens["127.0.0.1:8032"] = delegationToken(creds.KindRMDelegation, "127.0.0.1:8032", now, now.Add(time.Hour))
	uri := "hdfs://nn:8020/user/alice/.spindle/app/" + tokensFile
	k, err := newTokenKeeper(quiet(), nil, "alice@EXAMPLE.COM", uri, nil, start)
	if err != nil {
		t.Fatal(err)
	}
	// The keeper plans from its own clock, read after now: a quarter of
	// the time it took, and the millisecond of the credentials' dates,
	// may come on top of the 3 h.
	after := time.Now()
	got, err := creds.Parse(k.Tokens())
	if err != nil {
		t.Fatal(err)
	}
	r, ok := dfs.RefreshOf(got)
	if !ok || r.URI != uri {
		t.Fatalf("containers' credentials announce %+v (%v), want the tokens file %s", r, ok, uri)
	}
	if lo, hi := now.Add(3*time.Hour-time.Minute), after.Add(3*time.Hour+time.Millisecond); r.Next.Before(lo) || r.Next.After(hi) {
		t.Errorf("next tokens at %v, want three quarters of the 4 h to the first maximum date (%v)", r.Next.Sub(now), 3*time.Hour)
	}
	if len(got.Tokens) != 3 {
		t.Errorf("containers get %d tokens, want ps-submit's 3", len(got.Tokens))
	}
	if _, ok := start.Secrets[dfs.TokensNextSecret]; ok {
		t.Error("the keeper wrote into ps-submit's credentials")
	}

	for name, c := range map[string]*creds.Credentials{
		"no HDFS token": {Tokens: map[string]creds.Token{"rm": start.Tokens["127.0.0.1:8032"]}},
		"no dates":      {Tokens: map[string]creds.Token{"nn": {Identifier: []byte{0, 1, 'a', 0, 0}, Kind: creds.KindHDFSDelegation}}},
		"malformed":     {Tokens: map[string]creds.Token{"nn": {Identifier: []byte{7}, Kind: creds.KindHDFSDelegation}}},
	} {
		if _, err := newTokenKeeper(quiet(), nil, "alice", uri, nil, c); err == nil {
			t.Errorf("%s: a keeper started", name)
		}
	}
}

// TestAMTokens: without a keytab the AM hands out ps-submit's tokens as
// they are, announcing nothing; without Kerberos, none.
func TestAMTokens(t *testing.T) {
	now := time.Now()
	start := creds.New()
	start.Tokens["nn"] = delegationToken(creds.KindHDFSDelegation, "127.0.0.1:8020", now, now.Add(time.Hour))
	tokens, stop, err := amTokens(quiet(), nil, amJobConfig{}, start)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	got, err := creds.Parse(tokens())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dfs.RefreshOf(got); ok || len(got.Tokens) != 1 {
		t.Errorf("without a keytab: %d tokens, refresh announced %v", len(got.Tokens), ok)
	}
	tokens, stop, err = amTokens(quiet(), nil, amJobConfig{}, nil)
	if err != nil || tokens() != nil {
		t.Errorf("without Kerberos: %v %v", tokens(), err)
	}
	stop()
	_, _, err = amTokens(quiet(), nil, amJobConfig{Principal: "alice@EXAMPLE.COM"}, start)
	if err == nil || !strings.Contains(err.Error(), "staging") {
		t.Errorf("a keytab without a staging directory: %v", err)
	}
}

// TestStageKeytab: logged in from a keytab, ps-submit stages it for the
// ApplicationMaster alone, as a private resource, and job.json names the
// principal; logged in from the ticket cache, nothing of the kind.
func TestStageKeytab(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keytab := filepath.Join(t.TempDir(), "alice.keytab")
	if err := os.WriteFile(keytab, []byte("not a real keytab"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := conf.NewJobKeys("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	spec := job.JobSpec{Command: []string{"/bin/true"}, NumWorkers: 1}
	ctx := context.Background()
	for _, kl := range []amKerberos{{}, {Principal: "alice@EXAMPLE.COM", Keytab: keytab, TokenFS: map[string]string{"127.0.0.1:8020": "hdfs://localhost:8020/"}}} {
		dir := t.TempDir()
		res, err := stage(ctx, dfs.Local{}, dir, spec, self, func(string) (string, bool) { return "", false }, conf.HadoopConf{}, keys, Options{}, kl)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, amJobFile))
		if err != nil {
			t.Fatal(err)
		}
		var jc amJobConfig
		if err := json.Unmarshal(b, &jc); err != nil {
			t.Fatal(err)
		}
		r, shipped := res[amKeytab]
		if _, toTasks := jc.Resources[amKeytab]; toTasks {
			t.Errorf("%+v: the keytab goes to the tasks", kl)
		}
		if kl.Keytab == "" {
			if shipped || jc.Principal != "" {
				t.Errorf("from the ticket cache: keytab shipped %v, principal %q", shipped, jc.Principal)
			}
			continue
		}
		if !shipped || r.Visibility != "PRIVATE" || jc.Principal != kl.Principal || jc.TokenFS["127.0.0.1:8020"] != "hdfs://localhost:8020/" {
			t.Errorf("from a keytab: resource %+v (%v), job.json principal %q, token file systems %v", r, shipped, jc.Principal, jc.TokenFS)
		}
		if got, err := os.ReadFile(filepath.Join(dir, amKeytab)); err != nil || string(got) != "not a real keytab" {
			t.Errorf("staged keytab: %q %v", got, err)
		}
	}
}
