package yarnclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/io/dfs"
)

// amKeytab is the link name of the keytab ps-submit ships to the
// ApplicationMaster (a private resource, AM only) when it logged in
// with --principal/--keytab.
const amKeytab = "spindle.keytab"

// tokensFile is the name, in the staging directory, of the credentials
// file the ApplicationMaster writes the tasks' newer tokens to.
const tokensFile = "tokens"

// amKerberos is what ps-submit, logged in from a keytab, gives the
// ApplicationMaster to obtain new tokens with (amJobConfig.Principal,
// TokenFS); zero when it logged in from the ticket cache.
type amKerberos struct {
	Principal, Keytab string
	TokenFS           map[string]string
}

// Bounds of the ApplicationMaster's retries when obtaining new tokens
// fails.
const (
	renewRetryMin = 10 * time.Second
	renewRetryMax = 5 * time.Minute
)

// amTokens is what the AM's task containers get as their credentials
// (yarnam.Options.Tokens) from the tokens ps-submit obtained (start; nil
// on a cluster without Kerberos), and a function that stops keeping them
// when the job is over. With a keytab (jc.Principal) a tokenKeeper,
// logged in through login, keeps them past their maximum lifetime;
// without, they last as long as the ResourceManager can renew them.
func amTokens(log *logrus.Entry, login *dfs.Resolver, jc amJobConfig, start *creds.Credentials) (tokens func() []byte, stop func(), err error) {
	if start == nil {
		return func() []byte { return nil }, func() {}, nil
	}
	if jc.Principal == "" {
		b, err := start.MarshalBinary()
		if err != nil {
			return nil, nil, err
		}
		if _, hasHDFS := start.Find(creds.KindHDFSDelegation); hasHDFS {
			log.Info("the tasks' delegation tokens end at their maximum lifetime: submit with --principal and --keytab for jobs that run longer")
		}
		return func() []byte { return b }, func() {}, nil
	}
	if jc.Staging == "" {
		return nil, nil, errors.New("new delegation tokens need the staging directory, and job.json names none")
	}
	k, err := newTokenKeeper(log, login, jc.Principal, jc.Staging+"/"+tokensFile, jc.TokenFS, start)
	if err != nil {
		return nil, nil, fmt.Errorf("delegation tokens for the tasks: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(ctx)
	}()
	var once sync.Once
	return k.Tokens, func() { once.Do(func() { cancel(); <-done }) }, nil
}

// renewAt is when tokens that expire at expiry, as of now, are replaced:
// three quarters of the way there, as Hadoop's own renewers do.
func renewAt(now, expiry time.Time) time.Time {
	return now.Add(expiry.Sub(now) * 3 / 4)
}

// tokenKeeper keeps a job's HDFS delegation tokens alive past their
// maximum lifetime (7 days by default), which no renewal extends. Logged
// in from the keytab ps-submit shipped, the ApplicationMaster obtains new
// tokens three quarters of the way to the first expiry of those the tasks
// have, names itself their renewer, and renews each once to learn when it
// expires. It writes them to the staging directory (tokensFile, which only
// the user may read), and every credentials file it hands out announces
// where and when (dfs.TokenRefresh), so that running tasks read them then
// (dfs.Resolver) and containers started later get them at once.
type tokenKeeper struct {
	log      *logrus.Entry
	login    *dfs.Resolver     // reaches HDFS with the keytab's login
	renewer  string            // the login's principal
	uri      string            // the tokens file
	fsOf     map[string]string // token service → the URI of its file system
	obtained []obtainedToken   // every token the keeper obtained, cancelled at the end

	mu     sync.Mutex
	cur    *creds.Credentials // what a container started now gets
	blob   []byte             // cur, encoded
	expiry time.Time          // the first expiry of cur's HDFS tokens
	next   time.Time          // when the keeper obtains the next ones, as cur announces
}

// obtainedToken is a token the keeper obtained and when it expires
// unless renewed.
type obtainedToken struct {
	t      creds.Token
	expiry time.Time
}

// newTokenKeeper starts from the tokens ps-submit obtained (the task
// tokens of the AM's credentials file), which the ResourceManager renews
// until their maximum date.
func newTokenKeeper(log *logrus.Entry, login *dfs.Resolver, renewer, uri string, fsOf map[string]string, start *creds.Credentials) (*tokenKeeper, error) {
	k := &tokenKeeper{log: log, login: login, renewer: renewer, uri: uri, fsOf: fsOf}
	var expiry time.Time
	for _, t := range start.Tokens {
		if t.Kind != creds.KindHDFSDelegation {
			continue
		}
		d, err := creds.ParseDelegation(t.Identifier)
		if err != nil {
			return nil, fmt.Errorf("delegation token of %s: %w", t.Service, err)
		}
		if d.Max.IsZero() {
			return nil, fmt.Errorf("delegation token of %s: its identifier has no maximum date", t.Service)
		}
		if expiry.IsZero() || d.Max.Before(expiry) {
			expiry = d.Max
		}
	}
	if expiry.IsZero() {
		return nil, errors.New("the client's credentials hold no HDFS delegation token")
	}
	c, b, next, err := k.announce(start.Tokens, start.Secrets, expiry, time.Now())
	if err != nil {
		return nil, err
	}
	k.set(c, b, expiry, next)
	return k, nil
}

// announce makes the credentials of tokens (and secrets), whose HDFS
// tokens first expire at expiry, announcing the next ones for
// renewAt(now, expiry); it returns them encoded too, and that time.
func (k *tokenKeeper) announce(tokens map[string]creds.Token, secrets map[string][]byte, expiry, now time.Time) (*creds.Credentials, []byte, time.Time, error) {
	next := renewAt(now, expiry)
	c := &creds.Credentials{Tokens: tokens, Secrets: maps.Clone(secrets)}
	dfs.SetRefresh(c, dfs.TokenRefresh{URI: k.uri, Next: next})
	b, err := c.MarshalBinary()
	return c, b, next, err
}

// set makes c (encoded: b) the tokens containers get.
func (k *tokenKeeper) set(c *creds.Credentials, b []byte, expiry, next time.Time) {
	k.mu.Lock()
	k.cur, k.blob, k.expiry, k.next = c, b, expiry, next
	k.mu.Unlock()
}

// Tokens is the credentials blob of a container started now.
func (k *tokenKeeper) Tokens() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.blob
}

// run obtains new tokens each time they are due until ctx ends, then
// cancels those it obtained. A failure is logged and tried again, sooner
// than the tasks' tokens expire.
func (k *tokenKeeper) run(ctx context.Context) {
	defer k.cancelObtained()
	retry := renewRetryMin
	k.mu.Lock()
	next := k.next
	k.mu.Unlock()
	wait := time.Until(next)
	k.log.WithField("at", next.Format(time.RFC3339)).Info("new delegation tokens will be obtained past their maximum lifetime")
	for {
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next, err := k.renew(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			retry, wait = renewRetryMin, time.Until(next)
			k.log.WithField("next", next.Format(time.RFC3339)).Info("new delegation tokens written for the tasks")
			continue
		}
		k.mu.Lock()
		left := time.Until(k.expiry)
		k.mu.Unlock()
		k.log.WithError(err).WithField("expire_in", left.Round(time.Second).String()).Warn("could not obtain new delegation tokens; trying again")
		// Sooner while the tasks' tokens still hold.
		wait = retry
		if left > 0 {
			wait = min(wait, max(left/4, time.Second))
		}
		retry = min(2*retry, renewRetryMax)
	}
}

// renew obtains a new token for each HDFS the tasks have one for, learns
// when each expires, and writes them where the tasks look. It returns when
// the next ones are due.
func (k *tokenKeeper) renew(ctx context.Context) (time.Time, error) {
	k.mu.Lock()
	cur := k.cur
	k.mu.Unlock()
	now := time.Now()
	tokens := maps.Clone(cur.Tokens)
	var expiry time.Time
	for alias, old := range cur.Tokens {
		if old.Kind != creds.KindHDFSDelegation {
			continue
		}
		h, err := k.hdfsOf(ctx, old)
		if err != nil {
			return time.Time{}, err
		}
		t, err := h.DelegationToken(ctx, k.renewer)
		if err != nil {
			return time.Time{}, err
		}
		exp, err := h.RenewDelegationToken(ctx, t)
		k.obtained = append(k.obtained, obtainedToken{t, exp})
		if err != nil {
			return time.Time{}, err
		}
		tokens[alias] = t
		if expiry.IsZero() || exp.Before(expiry) {
			expiry = exp
		}
	}
	if !expiry.After(now) {
		return time.Time{}, fmt.Errorf("the new delegation tokens expire at once (%s)", expiry.Format(time.RFC3339))
	}
	c, b, next, err := k.announce(tokens, cur.Secrets, expiry, now)
	if err != nil {
		return time.Time{}, err
	}
	fsys, name, err := k.login.Resolve(ctx, k.uri)
	if err != nil {
		return time.Time{}, err
	}
	if err := dfs.WriteFile(ctx, fsys, name, b); err != nil {
		return time.Time{}, fmt.Errorf("write %s: %w", k.uri, err)
	}
	k.set(c, b, expiry, next)
	return next, nil
}

// hdfsOf is the file system a delegation token is for: the one ps-submit
// obtained it from (fsOf, by the token's service), else the one its
// service names ("ha-hdfs:<nameservice>", or a NameNode's ip:port).
func (k *tokenKeeper) hdfsOf(ctx context.Context, t creds.Token) (*dfs.HDFS, error) {
	uri, ok := k.fsOf[t.Service]
	if !ok {
		uri = "hdfs://" + strings.TrimPrefix(t.Service, "ha-hdfs:") + "/"
	}
	fsys, _, err := k.login.Resolve(ctx, uri)
	if err != nil {
		return nil, err
	}
	h, ok := fsys.(*dfs.HDFS)
	if !ok {
		return nil, fmt.Errorf("delegation token of %s: %s is not an HDFS", t.Service, uri)
	}
	return h, nil
}

// cancelObtained cancels the tokens the keeper obtained that have not
// expired, the job being over, so that they are of no use to anyone who
// copied one. (An expired one is refused anyway, and the NameNode may
// have forgotten it.)
func (k *tokenKeeper) cancelObtained() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	now := time.Now()
	for _, o := range k.obtained {
		if !o.expiry.IsZero() && !o.expiry.After(now) {
			continue
		}
		h, err := k.hdfsOf(ctx, o.t)
		if err == nil {
			err = h.CancelDelegationToken(ctx, o.t)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		k.log.WithError(err).Warn("could not cancel the delegation tokens obtained for the tasks")
	}
}
