package yarnclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/yarn"
)

// Login says how ps-submit logs in to a Kerberos-secured cluster: from
// Keytab as Principal when both are set, else from the ticket cache
// ($KRB5CCNAME, as kinit leaves it).
type Login struct {
	Principal, Keytab string
}

// hadoopClient is the client's side of a Hadoop cluster: its
// configuration, who the client is there, and how it proves it.
type hadoopClient struct {
	hc   conf.HadoopConf
	user string // the simple user, or the Kerberos principal's short name
	id   yarn.Identity
	cred dfs.Credentials
}

// newHadoopClient finds the Hadoop configuration through lookup and, on a
// Kerberos-secured cluster, logs in, so that a missing or expired ticket
// fails the command before it does anything.
func newHadoopClient(lookup conf.Lookup, login Login) (*hadoopClient, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	h, err := conf.LoadHadoop(lookup)
	if err != nil {
		return nil, err
	}
	hc := h.Conf
	if hc == nil {
		hc = conf.HadoopConf{}
	}
	c := &hadoopClient{hc: hc, user: h.User, id: yarn.Identity{User: h.User}}
	if !h.Security.Kerberos {
		if login.Principal != "" || login.Keytab != "" {
			return nil, errors.New("yarnclient: --principal and --keytab: the cluster does not use Kerberos (hadoop.security.authentication is not kerberos)")
		}
		return c, nil
	}
	sec := h.Security
	sec.Principal, sec.Keytab = login.Principal, login.Keytab
	kc, err := kerberos.Login(sec)
	if err != nil {
		return nil, fmt.Errorf("yarnclient: %w", err)
	}
	c.user = kerberos.ShortName(kerberos.Name(kc))
	c.id = yarn.Identity{User: c.user, Kerberos: kc}
	c.cred = dfs.Credentials{Login: kc}
	return c, nil
}

func (c *hadoopClient) secure() bool { return c.id.Kerberos != nil }

// web returns the client for the cluster's web servers whose Kerberos
// principal setting is principalKey: one that logs in with SPNEGO when
// they ask (hadoop.http.authentication.type=kerberos) on a secured
// cluster, the plain one elsewhere.
func (c *hadoopClient) web(principalKey string) *http.Client {
	if !c.secure() {
		return webClient
	}
	principal := kerberos.DefaultHTTPPrincipal
	for _, k := range []string{principalKey, "hadoop.http.authentication.kerberos.principal"} {
		if v, ok := c.hc.Get(k); ok && strings.TrimSpace(v) != "" {
			principal = v
			break
		}
	}
	return &http.Client{Timeout: webTimeout, Transport: kerberos.Transport(nil, c.id.Kerberos, principal)}
}

// The settings of the principals of the ResourceManager's web server (and
// its proxy, the tracking URLs) and of the NodeManagers'.
const (
	rmWebPrincipal = "yarn.resourcemanager.webapp.spnego-principal"
	nmWebPrincipal = "yarn.nodemanager.webapp.spnego-principal"
)

func (c *hadoopClient) resolver() *dfs.Resolver { return dfs.NewSecureResolver(c.hc, c.user, c.cred) }

func (c *hadoopClient) rm(ctx context.Context) (*yarn.RMClient, error) {
	rm, err := yarn.NewRMClient(ctx, c.hc, c.id)
	if err != nil {
		return nil, fmt.Errorf("yarnclient: connect to the resource manager: %w", err)
	}
	return rm, nil
}

// tokens obtains, on a Kerberos-secured cluster, the delegation tokens an
// application's containers need, which have no Kerberos credentials:
// one for each HDFS among uris (and the default file system), and the
// ResourceManager's. Their renewer is the ResourceManager, which renews
// them while the application runs and cancels them when it ends. It
// returns the Credentials blob for the launch context, and the URI of the
// file system of each HDFS token by its service; nil on a cluster without
// Kerberos.
func (c *hadoopClient) tokens(ctx context.Context, rm *yarn.RMClient, res *dfs.Resolver, uris []string) ([]byte, map[string]string, error) {
	if !c.secure() {
		return nil, nil, nil
	}
	renewer, err := yarn.RMPrincipal(ctx, c.hc)
	if err != nil {
		return nil, nil, err
	}
	fsOf := map[string]string{}
	cr := creds.New()
	seen := map[*dfs.HDFS]bool{}
	for _, uri := range append([]string{"hdfs:///"}, uris...) {
		u, err := dfs.ParseURI(uri)
		if err != nil || u.Scheme != "hdfs" {
			continue
		}
		fsys, _, err := res.Resolve(ctx, uri)
		if err != nil {
			if uri == "hdfs:///" {
				continue // no default HDFS
			}
			return nil, nil, err
		}
		h, ok := fsys.(*dfs.HDFS)
		if !ok || seen[h] {
			continue
		}
		seen[h] = true
		t, err := h.DelegationToken(ctx, renewer)
		if err != nil {
			return nil, nil, fmt.Errorf("yarnclient: %w", err)
		}
		cr.Tokens[t.Service] = t
		fsOf[t.Service] = h.URI("/")
	}
	t, err := rm.DelegationToken(ctx, renewer)
	if err != nil {
		return nil, nil, fmt.Errorf("yarnclient: resource manager delegation token: %w", err)
	}
	cr.Tokens[t.Service] = creds.Token(t)
	b, err := cr.MarshalBinary()
	if err != nil {
		return nil, nil, fmt.Errorf("yarnclient: delegation tokens: %w", err)
	}
	return b, fsOf, nil
}

// taskTokens is what an ApplicationMaster passes on to its task
// containers from its own credentials file: the delegation tokens,
// without the AM's own ResourceManager token. nil when there is none
// (a cluster without Kerberos).
func taskTokens(tokenFile string) (*creds.Credentials, error) {
	if tokenFile == "" {
		return nil, nil
	}
	cr, err := creds.ReadFile(tokenFile)
	if err != nil {
		return nil, err
	}
	out := creds.New()
	for alias, t := range cr.Tokens {
		if t.Kind == creds.KindHDFSDelegation || t.Kind == creds.KindRMDelegation {
			out.Tokens[alias] = t
		}
	}
	if len(out.Tokens) == 0 {
		return nil, nil
	}
	return out, nil
}
