package dfs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spindle-ps/spindle/conf"
)

// Resolver maps URIs onto file systems, keeping one HDFS client per
// NameNode authority and user. It is safe for concurrent use; Close it to
// close the HDFS connections.
type Resolver struct {
	hc    conf.HadoopConf
	user  string
	creds Credentials

	mu       sync.Mutex
	hdfs     map[resolverKey]*HDFS
	closed   bool
	onTokens func(time.Time, error) // see OnTokens

	stopKeeper context.CancelFunc // ends keepTokens; nil without it
	keeperDone chan struct{}      // closed when keepTokens has returned
}

type resolverKey struct{ authority, user string }

// NewResolver returns a Resolver that builds HDFS clients from hc (see
// HDFSOptionsFromConf) acting as user, which is typically
// hc.User(lookup): $HADOOP_USER_NAME or the login name.
func NewResolver(hc conf.HadoopConf, user string) *Resolver {
	return NewSecureResolver(hc, user, Credentials{})
}

// NewSecureResolver is NewResolver for a cluster that may use Kerberos:
// an HDFS of hc whose hadoop.security.authentication is kerberos is
// reached with c's delegation token for it, else with c's login.
//
// When c's tokens say where newer ones will be (RefreshOf), the Resolver
// reads them from there when they are announced, until it is closed (see
// OnTokens).
func NewSecureResolver(hc conf.HadoopConf, user string, c Credentials) *Resolver {
	r := &Resolver{hc: hc, user: user, creds: c, hdfs: map[resolverKey]*HDFS{}}
	if refresh, ok := RefreshOf(c.Tokens); ok {
		ctx, cancel := context.WithCancel(context.Background())
		r.stopKeeper, r.keeperDone = cancel, make(chan struct{})
		go r.keepTokens(ctx, refresh)
	}
	return r
}

// Resolve returns the file system of uri and the name of uri within it
// (see ParseURI for the forms accepted). "hdfs:///p" uses the NameNode of
// fs.defaultFS. Resolve does no I/O: an unreachable NameNode is reported
// by the first operation on the file system.
func (r *Resolver) Resolve(ctx context.Context, uri string) (FileSystem, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("dfs: resolve %s: %w", uri, err)
	}
	u, err := ParseURI(uri)
	if err != nil {
		return nil, "", err
	}
	if u.Scheme == "file" {
		return Local{}, u.Path, nil
	}
	auth := u.Authority
	if auth == "" {
		def := r.hc.DefaultFS()
		du, err := ParseURI(def)
		if err != nil || du.Scheme != "hdfs" || du.Authority == "" {
			return nil, "", fmt.Errorf("dfs: %s names no NameNode and fs.defaultFS is %q, not hdfs://host:port", uri, def)
		}
		auth = du.Authority
	}
	key := resolverKey{auth, r.user}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, "", fmt.Errorf("dfs: resolve %s: %w", uri, ErrClosed)
	}
	if h, ok := r.hdfs[key]; ok {
		return h, u.Path, nil
	}
	opts, err := HDFSOptionsFromConf(r.hc, auth, r.user)
	if err != nil {
		return nil, "", fmt.Errorf("dfs: resolve %s: %w", uri, err)
	}
	if opts.Kerberos {
		if t, ok := r.creds.tokenFor(ctx, opts); ok {
			opts.Token = &t
		} else {
			opts.Login = r.creds.Login
		}
	}
	h, err := NewHDFS(opts)
	if err != nil {
		return nil, "", fmt.Errorf("dfs: resolve %s: %w", uri, err)
	}
	r.hdfs[key] = h
	return h, u.Path, nil
}

// Close closes every HDFS file system the Resolver made; it is
// idempotent, and Resolve fails afterwards.
func (r *Resolver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	all := r.hdfs
	r.hdfs = nil
	r.mu.Unlock()
	if r.stopKeeper != nil {
		r.stopKeeper()
		<-r.keeperDone // it returns once its context is done
	}
	var errs []error
	for _, h := range all {
		if err := h.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DefaultResolver returns a Resolver for the Hadoop configuration and
// user found through lookup (conf.LoadHadoop): local files and the HDFS
// of that configuration.
//
// On a Kerberos-secured cluster it authenticates with the HDFS
// delegation tokens of $HADOOP_TOKEN_FILE_LOCATION (a YARN container's),
// else with the Kerberos ticket cache (LoadCredentials).
func DefaultResolver(lookup conf.Lookup) (*Resolver, error) {
	h, err := conf.LoadHadoop(lookup)
	if err != nil {
		return nil, err
	}
	if !h.Security.Kerberos {
		return NewResolver(h.Conf, h.User), nil
	}
	c, err := LoadCredentials(h.Security)
	if err != nil {
		return nil, err
	}
	return NewSecureResolver(h.Conf, h.User, c), nil
}
