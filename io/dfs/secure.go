package dfs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// Credentials are what a Resolver authenticates with to a Kerberos-secured
// HDFS: delegation tokens (inside a YARN container), else a Kerberos
// login.
type Credentials struct {
	Login  *krbclient.Client
	Tokens *creds.Credentials
}

// LoadCredentials finds the credentials of this process: the HDFS
// delegation tokens of s.TokenFile when it names a file that holds some,
// else a Kerberos login from s.Keytab or the ticket cache (see package
// kerberos); the error says how to log in when there is neither.
func LoadCredentials(s conf.HadoopSecurity) (Credentials, error) {
	if s.TokenFile != "" && s.Keytab == "" {
		c, err := creds.ReadFile(s.TokenFile)
		if err != nil {
			return Credentials{}, fmt.Errorf("dfs: credentials file %s ($%s): %w", s.TokenFile, conf.EnvHadoopTokenFile, err)
		}
		if _, ok := c.Find(creds.KindHDFSDelegation); ok {
			return Credentials{Tokens: c}, nil
		}
	}
	cl, err := kerberos.Login(s)
	if err != nil {
		return Credentials{}, fmt.Errorf("dfs: %w", err)
	}
	return Credentials{Login: cl}, nil
}

// tokenFor finds the HDFS delegation token whose service is the file
// system of o: "ha-hdfs:<nameservice>", or one of its NameNodes as
// host:port or ip:port.
func (c Credentials) tokenFor(ctx context.Context, o HDFSOptions) (creds.Token, bool) {
	if c.Tokens == nil {
		return creds.Token{}, false
	}
	want := map[string]bool{"ha-hdfs:" + o.Authority: true, o.Authority: true}
	for _, nn := range o.Namenodes {
		want[nn] = true
		if svc, err := creds.Service(ctx, nn); err == nil {
			want[svc] = true
		}
	}
	aliases := make([]string, 0, len(c.Tokens.Tokens))
	for a := range c.Tokens.Tokens {
		aliases = append(aliases, a)
	}
	sort.Strings(aliases) // the choice is the same every time
	for _, alias := range aliases {
		if t := c.Tokens.Tokens[alias]; t.Kind == creds.KindHDFSDelegation && want[t.Service] {
			return t, true
		}
	}
	return creds.Token{}, false
}

// DelegationToken asks a NameNode of h, over Kerberos, for a delegation
// token that renewer (a principal: the ResourceManager's, which renews it
// while the application runs) may renew. A YARN container reaches HDFS
// with it, having no Kerberos credentials of its own. Its service names h
// the way tokenFor looks it up. It needs a Kerberos login.
func (h *HDFS) DelegationToken(ctx context.Context, renewer string) (creds.Token, error) {
	var t creds.Token
	err := h.kerberosCall(ctx, "delegation token", func(ctx context.Context, nn string, c *hrpc.Conn) error {
		resp := &hpb.GetDelegationTokenResponseProto{}
		if err := c.Call(ctx, "getDelegationToken", &hpb.GetDelegationTokenRequestProto{Renewer: proto.String(renewer)}, resp); err != nil {
			return err
		}
		tp := resp.GetToken()
		if tp == nil || len(tp.GetIdentifier()) == 0 {
			return errors.New("the NameNode issued no token (is security off on it?)")
		}
		svc := "ha-hdfs:" + h.opts.Authority
		if len(h.opts.Namenodes) == 1 && strings.Contains(h.opts.Authority, ":") {
			var err error
			if svc, err = creds.Service(ctx, nn); err != nil {
				return err
			}
		}
		t = creds.Token{Identifier: tp.GetIdentifier(), Password: tp.GetPassword(), Kind: creds.KindHDFSDelegation, Service: svc}
		return nil
	})
	return t, err
}

// RenewDelegationToken asks a NameNode of h, over Kerberos, to renew t,
// which must name this login's user as its renewer, and returns when t
// now expires: the renewal interval from now, or t's maximum date,
// whichever is first.
func (h *HDFS) RenewDelegationToken(ctx context.Context, t creds.Token) (time.Time, error) {
	var expiry time.Time
	err := h.kerberosCall(ctx, "renew delegation token", func(ctx context.Context, _ string, c *hrpc.Conn) error {
		resp := &hpb.RenewDelegationTokenResponseProto{}
		if err := c.Call(ctx, "renewDelegationToken", &hpb.RenewDelegationTokenRequestProto{Token: tokenProto(t)}, resp); err != nil {
			return err
		}
		ms := resp.GetNewExpiryTime()
		if ms == 0 || ms > math.MaxInt64 {
			return fmt.Errorf("the NameNode answered an expiry time of %d ms", ms)
		}
		expiry = time.UnixMilli(int64(ms))
		return nil
	})
	return expiry, err
}

// CancelDelegationToken asks a NameNode of h, over Kerberos, to cancel t
// (its owner or renewer may): nobody can use it afterwards.
func (h *HDFS) CancelDelegationToken(ctx context.Context, t creds.Token) error {
	return h.kerberosCall(ctx, "cancel delegation token", func(ctx context.Context, _ string, c *hrpc.Conn) error {
		return c.Call(ctx, "cancelDelegationToken", &hpb.CancelDelegationTokenRequestProto{Token: tokenProto(t)}, &hpb.CancelDelegationTokenResponseProto{})
	})
}

func tokenProto(t creds.Token) *hpb.TokenProto {
	return &hpb.TokenProto{Identifier: t.Identifier, Password: t.Password, Kind: proto.String(t.Kind), Service: proto.String(t.Service)}
}

// kerberosCall runs call on a Kerberos connection to each NameNode of h in
// turn until one succeeds; what names the call in the error.
func (h *HDFS) kerberosCall(ctx context.Context, what string, call func(ctx context.Context, nn string, c *hrpc.Conn) error) error {
	if h.opts.Login == nil {
		return fmt.Errorf("dfs: hdfs://%s: %s needs a Kerberos login", h.opts.Authority, what)
	}
	return h.namenodeCall(ctx, what, call)
}

// namenodeCall runs call on a connection of this package's own to each
// NameNode of h in turn until one succeeds, authenticated as h's client
// is: with the Kerberos login, the delegation token, or as the user.
func (h *HDFS) namenodeCall(ctx context.Context, what string, call func(ctx context.Context, nn string, c *hrpc.Conn) error) error {
	var errs []error
	for _, nn := range h.opts.Namenodes {
		err := h.namenodeCallTo(ctx, nn, call)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", nn, err))
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("dfs: hdfs://%s: %s: %w", h.opts.Authority, what, errors.Join(errs...))
}

func (h *HDFS) namenodeCallTo(ctx context.Context, nn string, call func(ctx context.Context, nn string, c *hrpc.Conn) error) error {
	o := hrpc.Options{
		Protocol: namenodeProtocol, DialTimeout: h.opts.DialTimeout, Protection: h.opts.Protection,
		User: h.opts.User,
	}
	switch t := h.token.Load(); {
	case h.opts.Login != nil:
		spn, _, err := kerberos.ServicePrincipal(ctx, h.opts.NamenodePrincipal, nn)
		if err != nil {
			return err
		}
		o.Auth, o.Kerberos, o.ServicePrincipal = hrpc.AuthKerberos, h.opts.Login, spn
	case h.opts.Kerberos && t != nil:
		o.Auth, o.TokenIdentifier, o.TokenPassword = hrpc.AuthToken, t.Identifier, t.Password
	}
	if h.opts.RPCTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.RPCTimeout)
		defer cancel()
	}
	c, err := hrpc.Dial(ctx, nn, o)
	if err != nil {
		return err
	}
	defer c.Close()
	return call(ctx, nn, c)
}
