// Package webauth guards a job's status page, as http.Handler
// middleware that either launcher wraps around the page's handler:
//
//   - Token, for a job run on this machine: the page is served only to a
//     request that carries the job's token, in the URL ps-submit prints
//     (?token=…, which is then kept in a cookie) or in that cookie.
//   - Proxy, for a job on YARN: the page is served only to requests that
//     come from the ResourceManager's web proxy, as YARN's AmIpFilter
//     does; a browser that reaches the ApplicationMaster directly is sent
//     to the proxy instead. The proxy's hosts are those of
//     yarn.web-proxy.address, or, without a separate proxy, of the
//     ResourceManagers' web addresses (ProxyHosts).
package webauth

import (
	"context"
	crand "crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// TokenParam is the query parameter, and CookieName the cookie, that
// carry the token.
const (
	TokenParam = "token"
	CookieName = "spindle-token"
)

// NewToken returns a new random token.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("webauth: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Token serves h to requests that carry token (in the cookie, or in an
// "Authorization: Bearer" header, for programs), and 403 Forbidden to any
// other. A request with the right ?token= gets the token as a cookie
// (HttpOnly, SameSite=Strict) and is redirected to the same URL without
// it, so that the page's own links and reloads need no token in the URL.
// An empty token refuses every request.
func Token(token string, h http.Handler) http.Handler {
	want := []byte(token)
	ok := func(got string) bool {
		return len(want) > 0 && subtle.ConstantTimeCompare([]byte(got), want) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has(TokenParam) {
			if !ok(q.Get(TokenParam)) {
				http.Error(w, "forbidden: wrong token", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode})
			q.Del(TokenParam)
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(bearer) {
			h.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(CookieName); err == nil && ok(c.Value) {
			h.ServeHTTP(w, r)
			return
		}
		http.Error(w, "forbidden: open the status page with the URL ps-submit printed", http.StatusForbidden)
	})
}

// ProxyHosts returns the "host:port" of the ResourceManager's web proxy
// as YARN tells an ApplicationMaster's filter (AmIpFilter's PROXY_HOSTS):
// yarn.web-proxy.address when set; otherwise the web address of each
// ResourceManager (yarn.resourcemanager.webapp.address, or its https
// form under yarn.http.policy HTTPS_ONLY; per id in
// yarn.resourcemanager.ha.rm-ids with HA), the RM's host with its
// default web port when not set. It returns nil when nothing names one.
func ProxyHosts(conf map[string]string) []string {
	if a := strings.TrimSpace(conf["yarn.web-proxy.address"]); a != "" {
		return []string{a}
	}
	key, port := "yarn.resourcemanager.webapp.address", "8088"
	if strings.EqualFold(strings.TrimSpace(conf["yarn.http.policy"]), "HTTPS_ONLY") {
		key, port = "yarn.resourcemanager.webapp.https.address", "8090"
	}
	addr := func(suffix string) string {
		if a := strings.TrimSpace(conf[key+suffix]); a != "" {
			return a
		}
		if h := strings.TrimSpace(conf["yarn.resourcemanager.hostname"+suffix]); h != "" {
			return net.JoinHostPort(h, port)
		}
		return ""
	}
	var out []string
	if ids := strings.TrimSpace(conf["yarn.resourcemanager.ha.rm-ids"]); ids != "" &&
		strings.EqualFold(strings.TrimSpace(conf["yarn.resourcemanager.ha.enabled"]), "true") {
		for _, id := range strings.Split(ids, ",") {
			if a := addr("." + strings.TrimSpace(id)); a != "" {
				out = append(out, a)
			}
		}
		return out
	}
	if a := addr(""); a != "" {
		out = append(out, a)
	}
	return out
}

// ProxyOptions configure Proxy.
type ProxyOptions struct {
	// Hosts are the proxy's "host:port" (ProxyHosts); the hosts are
	// resolved, and a request is the proxy's when it comes from one of
	// their addresses. Empty refuses every request.
	Hosts []string
	// URIBase is the page's base path under the proxy,
	// "/proxy/<application id>" (APPLICATION_WEB_PROXY_BASE in the AM's
	// environment); a direct request is redirected to it on the first
	// host. Empty answers 403 Forbidden instead.
	URIBase string
	// Refresh is how long resolved addresses are kept; 0 means 5 minutes,
	// as AmIpFilter.
	Refresh time.Duration
	// Resolve looks a host up; nil means net.DefaultResolver.
	Resolve func(ctx context.Context, host string) ([]string, error)
}

// resolveTimeout bounds a look-up of the proxy's hosts, and retryResolve
// is how soon a failed one is tried again.
const (
	resolveTimeout = 5 * time.Second
	retryResolve   = 10 * time.Second
)

// Proxy serves h only to requests from the ResourceManager's web proxy.
func Proxy(o ProxyOptions, h http.Handler) http.Handler {
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Minute
	}
	if o.Resolve == nil {
		o.Resolve = net.DefaultResolver.LookupHost
	}
	p := &proxy{o: o, h: h}
	return p
}

type proxy struct {
	o ProxyOptions
	h http.Handler

	mu     sync.Mutex
	addrs  map[string]bool
	expiry time.Time
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && p.allowed(r.Context())[ip.String()] {
		p.h.ServeHTTP(w, r)
		return
	}
	if p.o.URIBase != "" && len(p.o.Hosts) > 0 {
		u := url.URL{Scheme: "http", Host: p.o.Hosts[0], Path: strings.TrimSuffix(p.o.URIBase, "/") + r.URL.Path, RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, u.String(), http.StatusFound)
		return
	}
	http.Error(w, "forbidden: the status page is served through the ResourceManager's web proxy", http.StatusForbidden)
}

// allowed returns the proxy's addresses, resolved at most every Refresh.
func (p *proxy) allowed(ctx context.Context) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addrs != nil && time.Now().Before(p.expiry) {
		return p.addrs
	}
	addrs := map[string]bool{}
	refresh := p.o.Refresh
	for _, hp := range p.o.Hosts {
		h, _, err := net.SplitHostPort(hp)
		if err != nil {
			h = hp
		}
		if ip := net.ParseIP(h); ip != nil {
			addrs[ip.String()] = true
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		ips, err := p.o.Resolve(rctx, h)
		cancel()
		if err != nil {
			// Refused until the look-up is tried again, soon.
			refresh = min(refresh, retryResolve)
			continue
		}
		for _, a := range ips {
			if ip := net.ParseIP(a); ip != nil {
				addrs[ip.String()] = true
			}
		}
	}
	p.addrs, p.expiry = addrs, time.Now().Add(refresh)
	return addrs
}

// Addrs returns the addresses h (a Proxy) accepts now, sorted: for logs.
func Addrs(h http.Handler) []string {
	p, ok := h.(*proxy)
	if !ok {
		return nil
	}
	var out []string
	for a := range p.allowed(context.Background()) {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}
