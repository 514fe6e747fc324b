// Package kerberos logs a Hadoop client in to Kerberos, from a keytab or
// from a ticket cache, with errors that say which file failed and how to
// mend it, and names the services' principals the way Hadoop's
// configuration does (service/_HOST@REALM).
//
// The Kerberos protocol itself is github.com/jcmturner/gokrb5's, which the
// HDFS client already uses; every exchange with a KDC is bounded by its
// 5-second network timeouts.
package kerberos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/spindle-ps/spindle/conf"
)

// Hint is what a user without a usable ticket is told to do.
const Hint = "run kinit, or pass --principal and --keytab"

// Login returns a logged-in client: from s.Keytab as s.Principal when
// both are set, else from the ticket cache s.CCache. The ticket
// granting ticket must still be valid (a ticket cache is not renewed).
func Login(s conf.HadoopSecurity) (*client.Client, error) {
	if (s.Principal == "") != (s.Keytab == "") {
		return nil, errors.New("kerberos: --principal and --keytab go together")
	}
	cfg, err := loadConfig(s.Krb5Conf)
	if err != nil {
		return nil, err
	}
	if s.Keytab != "" {
		return loginKeytab(s.Principal, s.Keytab, cfg)
	}
	return loginCCache(s.CCache, cfg, time.Now())
}

func loadConfig(path string) (*config.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kerberos: configuration %s: %w (set KRB5_CONFIG to your krb5.conf)", path, err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("kerberos: configuration %s: %w", path, err)
	}
	return cfg, nil
}

func loginKeytab(principal, path string, cfg *config.Config) (*client.Client, error) {
	user, realm := SplitPrincipal(principal)
	if realm == "" {
		realm = cfg.LibDefaults.DefaultRealm
	}
	if user == "" || realm == "" {
		return nil, fmt.Errorf("kerberos: --principal %q: want user@REALM (krb5.conf names no default realm)", principal)
	}
	kt, err := keytab.Load(path)
	if err != nil {
		return nil, fmt.Errorf("kerberos: keytab %s: %w", path, err)
	}
	if !hasPrincipal(kt, user, realm) {
		return nil, fmt.Errorf("kerberos: keytab %s holds no key for %s@%s", path, user, realm)
	}
	cl := client.NewWithKeytab(user, realm, kt, cfg, client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		return nil, fmt.Errorf("kerberos: log in as %s@%s with keytab %s: %s", user, realm, path, explain(err))
	}
	return cl, nil
}

func hasPrincipal(kt *keytab.Keytab, user, realm string) bool {
	for _, e := range kt.Entries {
		if e.Principal.Realm == realm && strings.Join(e.Principal.Components, "/") == user {
			return true
		}
	}
	return false
}

func loginCCache(path string, cfg *config.Config, now time.Time) (*client.Client, error) {
	if i := strings.IndexByte(path, ':'); i > 0 && !strings.ContainsRune(path[:i], '/') {
		return nil, fmt.Errorf("kerberos: ticket cache %s: only FILE: caches can be read; %s, or point KRB5CCNAME at a file (kinit -c FILE:/path)", path, Hint)
	}
	cc, err := loadCCache(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("kerberos: no ticket cache at %s: %s", path, Hint)
		}
		return nil, fmt.Errorf("kerberos: ticket cache %s: %w", path, err)
	}
	princ := cc.DefaultPrincipal.PrincipalName.PrincipalNameString() + "@" + cc.DefaultPrincipal.Realm
	tgt, ok := cc.GetEntry(types.NewPrincipalName(2, "krbtgt/"+cc.DefaultPrincipal.Realm)) // KRB_NT_SRV_INST
	if !ok {
		return nil, fmt.Errorf("kerberos: ticket cache %s holds no ticket-granting ticket for %s: %s", path, princ, Hint)
	}
	if !tgt.EndTime.After(now) {
		return nil, fmt.Errorf("kerberos: the ticket of %s in %s expired at %s: %s", princ, path, tgt.EndTime.UTC().Format(time.RFC3339), Hint)
	}
	cl, err := client.NewFromCCache(cc, cfg, client.DisablePAFXFAST(true))
	if err != nil {
		return nil, fmt.Errorf("kerberos: ticket cache %s: %w", path, err)
	}
	return cl, nil
}

// explain turns gokrb5's nested error text into a reason a user can act
// on, keeping the original.
func explain(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "PREAUTH_FAILED"), strings.Contains(msg, "BAD_INTEGRITY"), strings.Contains(msg, "Decrypting_Error"):
		return "the KDC refused the key (a wrong or outdated keytab): " + msg
	case strings.Contains(msg, "KDC_ERR_C_PRINCIPAL_UNKNOWN"):
		return "the KDC does not know this principal: " + msg
	case strings.Contains(msg, "KDC_ERR_CLIENT_REVOKED"), strings.Contains(msg, "KDC_ERR_KEY_EXPIRED"):
		return "the principal is locked or its key expired: " + msg
	case strings.Contains(msg, "connection refused"), strings.Contains(msg, "i/o timeout"), strings.Contains(msg, "no KDC"):
		return "no KDC answered (check [realms] in krb5.conf): " + msg
	}
	return msg
}

// SplitPrincipal splits "user@REALM" (or "service/host@REALM") into the
// name and the realm, which may be empty.
func SplitPrincipal(p string) (name, realm string) {
	if i := strings.LastIndexByte(p, '@'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// ShortName is the name Hadoop's default auth_to_local rule gives a
// principal: its first component ("alice" for alice@R, "nn" for
// nn/host@R).
func ShortName(principal string) string {
	name, _ := SplitPrincipal(principal)
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return name
}

// ServicePrincipal resolves a server principal setting such as
// dfs.namenode.kerberos.principal ("nn/_HOST@REALM") for the server at
// addr (host:port): _HOST becomes the host's canonical name, lower case,
// as Hadoop's SecurityUtil does (the lookups end with ctx). It returns the
// principal without its realm ("nn/nn1.example.com") and the realm.
func ServicePrincipal(ctx context.Context, setting, addr string) (spn, realm string, err error) {
	if strings.TrimSpace(setting) == "" {
		return "", "", errors.New("kerberos: no server principal configured")
	}
	spn, realm = SplitPrincipal(strings.TrimSpace(setting))
	parts := strings.Split(spn, "/")
	if len(parts) == 2 && parts[1] == "_HOST" {
		host, _, herr := net.SplitHostPort(addr)
		if herr != nil {
			host = addr
		}
		parts[1] = strings.ToLower(canonicalHost(ctx, host))
		spn = strings.Join(parts, "/")
	}
	return spn, realm, nil
}

// canonicalHost is the host's name as its address resolves back, or the
// host itself when it does not.
func canonicalHost(ctx context.Context, host string) string {
	r := net.DefaultResolver
	if ip := net.ParseIP(host); ip == nil {
		if cname, err := r.LookupCNAME(ctx, host); err == nil && cname != "" {
			host = strings.TrimSuffix(cname, ".")
		}
		addrs, err := r.LookupHost(ctx, host)
		if err != nil || len(addrs) == 0 {
			return host
		}
		host = addrs[0]
	}
	names, err := r.LookupAddr(ctx, host)
	if err != nil || len(names) == 0 {
		return host
	}
	return strings.TrimSuffix(names[0], ".")
}

// Name is the principal the client is logged in as, user@REALM.
func Name(cl *client.Client) string {
	return cl.Credentials.CName().PrincipalNameString() + "@" + cl.Credentials.Realm()
}
