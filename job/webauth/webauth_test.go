package webauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

var page = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("the status")) })

func TestToken(t *testing.T) {
	srv := httptest.NewServer(Token("t0k3n", page))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(c *http.Client, url string, cookie *http.Cookie) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name   string
		url    string
		cookie *http.Cookie
	}{
		{"no token", "/status.json", nil},
		{"wrong token", "/?token=guess", nil},
		{"empty token", "/?token=", nil},
		{"wrong cookie", "/", &http.Cookie{Name: CookieName, Value: "guess"}},
	} {
		if resp := get(noRedirect, srv.URL+tc.url, tc.cookie); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", tc.name, resp.Status)
		}
	}
	// The printed URL: a cookie, and the same page without the token.
	resp := get(noRedirect, srv.URL+"/status.json?token=t0k3n&x=1", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status.json?x=1" {
		t.Fatalf("token URL: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == CookieName && c.HttpOnly {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatal("no HttpOnly cookie")
	}
	if resp := get(noRedirect, srv.URL+"/status.json", cookie); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie: %s", resp.Status)
	}
	if resp := get(noRedirect, srv.URL+"/", &http.Cookie{Name: CookieName, Value: ""}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("empty cookie: %s", resp.Status)
	}
	// An empty token opens nothing.
	empty := httptest.NewServer(Token("", page))
	defer empty.Close()
	if resp := get(noRedirect, empty.URL+"/?token=", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("empty token: %s", resp.Status)
	}
}

func TestProxyHosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		conf map[string]string
		want []string
	}{
		{"web proxy", map[string]string{"yarn.web-proxy.address": "proxy:9046", "yarn.resourcemanager.webapp.address": "rm:8088"}, []string{"proxy:9046"}},
		{"rm webapp", map[string]string{"yarn.resourcemanager.webapp.address": "rm:18088"}, []string{"rm:18088"}},
		{"rm host", map[string]string{"yarn.resourcemanager.hostname": "rm"}, []string{"rm:8088"}},
		{"https", map[string]string{"yarn.http.policy": "HTTPS_ONLY", "yarn.resourcemanager.hostname": "rm"}, []string{"rm:8090"}},
		{"ha", map[string]string{"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "rm1, rm2",
			"yarn.resourcemanager.webapp.address.rm1": "a:8088", "yarn.resourcemanager.hostname.rm2": "b"}, []string{"a:8088", "b:8088"}},
		{"nothing", map[string]string{}, nil},
	} {
		if got := ProxyHosts(tc.conf); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// serve runs h on a request from remote.
func serve(h http.Handler, remote, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	req.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestProxy(t *testing.T) {
	lookups := 0 // look-ups are cached
	resolve := func(_ context.Context, host string) ([]string, error) {
		lookups++
		if host == "rm.example" {
			return []string{"10.0.0.5", "fd00::5"}, nil
		}
		return nil, errors.New("no such host")
	}
	h := Proxy(ProxyOptions{Hosts: []string{"rm.example:8088", "10.0.0.6:8088", "gone.example:1"}, URIBase: "/proxy/application_1_0001/",
		Resolve: resolve}, page)
	for _, from := range []string{"10.0.0.5:40000", "[fd00::5]:40000", "10.0.0.6:1"} {
		if w := serve(h, from, "/status.json"); w.Code != http.StatusOK || w.Body.String() != "the status" {
			t.Errorf("from the proxy at %s: %d %q", from, w.Code, w.Body.String())
		}
	}
	if lookups != 2 {
		t.Errorf("%d look-ups, want 2 (cached)", lookups)
	}
	// A direct request is sent to the proxy and shown nothing.
	w := serve(h, "10.0.0.99:5555", "/status.json?x=1")
	if w.Code != http.StatusFound || w.Header().Get("Location") != "http://rm.example:8088/proxy/application_1_0001/status.json?x=1" ||
		strings.Contains(w.Body.String(), "the status") {
		t.Errorf("direct request: %d to %q: %q", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	if got := Addrs(h); !reflect.DeepEqual(got, []string{"10.0.0.5", "10.0.0.6", "fd00::5"}) {
		t.Errorf("Addrs = %v", got)
	}
	// Without a base: 403.
	h = Proxy(ProxyOptions{Hosts: []string{"10.0.0.6:8088"}}, page)
	if w := serve(h, "127.0.0.1:1", "/"); w.Code != http.StatusForbidden {
		t.Errorf("direct request without a base: %d", w.Code)
	}
	// No proxy known: nothing is served.
	h = Proxy(ProxyOptions{}, page)
	if w := serve(h, "127.0.0.1:1", "/"); w.Code != http.StatusForbidden {
		t.Errorf("no proxy: %d", w.Code)
	}
}
