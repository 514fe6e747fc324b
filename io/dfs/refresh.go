package dfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/spindle-ps/spindle/internal/hadoop/creds"
)

// A delegation token lives at most its maximum lifetime (HDFS's
// dfs.namenode.delegation.token.max-lifetime, 7 days by default), however
// often it is renewed. A job that runs longer needs new tokens, which only
// a Kerberos login can obtain: the ApplicationMaster's, when ps-submit
// shipped it a keytab. It writes them to a credentials file in HDFS and
// says in each credentials file it hands out where that file is and when
// it next replaces it, as two secrets:
const (
	// TokensURISecret is the URI of the credentials file that newer
	// tokens are written to.
	TokensURISecret = "spindle.tokens.uri"
	// TokensNextSecret is when that file is next replaced, in Unix
	// milliseconds (decimal).
	TokensNextSecret = "spindle.tokens.next"
)

// TokenRefresh is where and when newer tokens will be.
type TokenRefresh struct {
	URI  string
	Next time.Time
}

// RefreshOf reads c's TokenRefresh; false when c carries none.
func RefreshOf(c *creds.Credentials) (TokenRefresh, bool) {
	if c == nil {
		return TokenRefresh{}, false
	}
	uri, next := c.Secrets[TokensURISecret], c.Secrets[TokensNextSecret]
	if len(uri) == 0 || len(next) == 0 {
		return TokenRefresh{}, false
	}
	ms, err := strconv.ParseInt(string(next), 10, 64)
	if err != nil || ms <= 0 {
		return TokenRefresh{}, false
	}
	return TokenRefresh{URI: string(uri), Next: time.UnixMilli(ms)}, true
}

// SetRefresh records r in c's secrets.
func SetRefresh(c *creds.Credentials, r TokenRefresh) {
	c.Secrets[TokensURISecret] = []byte(r.URI)
	c.Secrets[TokensNextSecret] = []byte(strconv.FormatInt(r.Next.UnixMilli(), 10))
}

// Bounds of the wait between two reads of a credentials file that had
// nothing newer (or could not be read); variables for the tests.
var (
	refreshRetryMin = time.Second
	refreshRetryMax = 30 * time.Second
	// refreshSpread is the most a Resolver waits after the announced
	// time, at random, so that a job's tasks do not all ask the
	// NameNode at once.
	refreshSpread = 5 * time.Second
)

// OnTokens sets f to be told of each attempt to pick up newer delegation
// tokens: the time of the next one, or why this one failed (the Resolver
// tries again). It is for logging; f must not block.
func (r *Resolver) OnTokens(f func(next time.Time, err error)) {
	r.mu.Lock()
	r.onTokens = f
	r.mu.Unlock()
}

// SetTokens makes c the Resolver's delegation tokens: file systems
// resolved from now on use them, and so do the new NameNode connections
// of those already resolved.
func (r *Resolver) SetTokens(ctx context.Context, c *creds.Credentials) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.creds.Tokens = c
	var errs []error
	for _, h := range r.hdfs {
		if h.token.Load() == nil {
			continue
		}
		if t, ok := r.creds.tokenFor(ctx, h.opts); ok {
			errs = append(errs, h.SetToken(t))
		}
	}
	return errors.Join(errs...)
}

// keepTokens replaces the Resolver's tokens with the newer ones of
// refresh.URI each time its credentials file announces them, until ctx
// ends.
func (r *Resolver) keepTokens(ctx context.Context, refresh TokenRefresh) {
	defer close(r.keeperDone)
	retry := refreshRetryMin
	wait := refreshWait(refresh.Next)
	for {
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c, err := r.readTokens(ctx, refresh.URI)
		next, ok := RefreshOf(c)
		switch {
		case err != nil:
		case !ok:
			err = fmt.Errorf("dfs: %s says nothing of the next tokens", refresh.URI)
		case !next.Next.After(refresh.Next):
			err = fmt.Errorf("dfs: %s has no tokens newer than those announced for %s", refresh.URI, refresh.Next.Format(time.RFC3339))
		default:
			err = r.SetTokens(ctx, c)
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			refresh, retry = next, refreshRetryMin
			wait = refreshWait(refresh.Next)
		} else {
			wait, retry = retry, min(2*retry, refreshRetryMax)
		}
		r.mu.Lock()
		f := r.onTokens
		r.mu.Unlock()
		if f != nil {
			f(refresh.Next, err)
		}
	}
}

// refreshWait is how long to wait for tokens announced for next: until
// then, and a little longer, at random, for the file to be written and
// the job's tasks to come one by one. The little is at most a thirtieth
// of the wait, a tenth of the time the current tokens have left then
// (their owner announces the next ones three quarters of the way).
func refreshWait(next time.Time) time.Duration {
	d := time.Until(next)
	if d <= 0 {
		return refreshRetryMin
	}
	return d + min(refreshRetryMin, d/30) + rand.N(min(refreshSpread, d/30)+1)
}

// readTokens reads the credentials file at uri with the Resolver's
// current tokens.
func (r *Resolver) readTokens(ctx context.Context, uri string) (*creds.Credentials, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultRPCTimeout)
	defer cancel()
	fsys, name, err := r.Resolve(ctx, uri)
	if err != nil {
		return nil, err
	}
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("dfs: newer delegation tokens: %w", err)
	}
	defer f.Close()
	c, err := creds.Read(f)
	if err != nil {
		return nil, fmt.Errorf("dfs: newer delegation tokens in %s: %w", uri, err)
	}
	return c, nil
}
