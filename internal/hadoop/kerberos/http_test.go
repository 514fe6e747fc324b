package kerberos

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
)

// TestTransport: answers without a Kerberos challenge pass through
// untouched, with no token sent; a challenge that no ticket can answer
// (the KDC does not answer) fails the request once, naming the server
// and the principals, rather than asking again.
func TestTransport(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadKDC := l.Addr().String()
	l.Close()
	cfg, err := config.NewFromString(fmt.Sprintf("[libdefaults]\n default_realm = EXAMPLE.COM\n udp_preference_limit = 1\n[realms]\n EXAMPLE.COM = {\n  kdc = %s\n }\n", deadKDC))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.NewWithPassword("alice", "EXAMPLE.COM", "secret", cfg, client.DisablePAFXFAST(true))

	var requests, withToken atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			withToken.Add(1)
		}
		switch r.URL.Path {
		case "/open":
			fmt.Fprint(w, "ok")
		case "/basic":
			w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.Header().Set("WWW-Authenticate", "Negotiate")
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: Transport(nil, cl, "HTTP/_HOST@EXAMPLE.COM")}

	for path, want := range map[string]int{"/open": http.StatusOK, "/basic": http.StatusUnauthorized} {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, want)
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests for two GETs without a Kerberos challenge, want 2", n)
	}

	_, err = hc.Get(srv.URL + "/negotiate")
	host := strings.TrimPrefix(srv.URL, "http://")
	if err == nil || !strings.Contains(err.Error(), host+" asks for Kerberos") || !strings.Contains(err.Error(), "HTTP/localhost") ||
		!strings.Contains(err.Error(), "alice@EXAMPLE.COM") {
		t.Errorf("GET of a page asking for Kerberos without a ticket to be had: %v; want an error naming %s, HTTP/localhost and alice@EXAMPLE.COM", err, host)
	}
	t.Log(err)
	if n, tok := requests.Load(), withToken.Load(); n != 3 || tok != 0 {
		t.Errorf("%d requests in all, %d with a token; want 3 and none", n, tok)
	}
}
