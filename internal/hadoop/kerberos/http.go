package kerberos

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/spnego"
)

// DefaultHTTPPrincipal is the principal of a Hadoop web server when the
// configuration names none: HTTP/ and the server's host.
const DefaultHTTPPrincipal = "HTTP/_HOST"

// Transport returns an http.RoundTripper that logs in to web servers
// which ask for Kerberos, as Hadoop's web consoles and REST APIs do when
// hadoop.http.authentication.type is kerberos: a request answered 401
// with "WWW-Authenticate: Negotiate" is sent once more with a SPNEGO token
// for the server's principal, from a ticket cl obtains. principal is the
// server's principal setting, such as "HTTP/_HOST@REALM" (_HOST becomes
// the request's host, canonical, as ServicePrincipal makes it). Requests
// with a body that cannot be sent again, and answers without the
// challenge, pass through unchanged. A server that refuses the token
// fails the request with an error that names the principals.
func Transport(base http.RoundTripper, cl *client.Client, principal string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &negotiator{base: base, cl: cl, principal: principal}
}

type negotiator struct {
	base      http.RoundTripper
	cl        *client.Client
	principal string
}

// maxChallengeBody bounds what is read of a 401's body before the
// request goes again, so that the connection can be reused.
const maxChallengeBody = 64 << 10

func (n *negotiator) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.base.RoundTrip(req)
	if err != nil || !challenged(resp) || req.Body != nil && req.GetBody == nil {
		return resp, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxChallengeBody))
	resp.Body.Close()
	spn, _, err := ServicePrincipal(req.Context(), n.principal, req.URL.Host)
	if err != nil {
		return nil, fmt.Errorf("kerberos: %s asks for Kerberos: %w", req.URL.Host, err)
	}
	again := req.Clone(req.Context())
	if req.Body != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	if err := spnego.SetSPNEGOHeader(n.cl, again, spn); err != nil {
		return nil, fmt.Errorf("kerberos: %s asks for Kerberos: a ticket for %s as %s: %w", req.URL.Host, spn, Name(n.cl), err)
	}
	resp, err = n.base.RoundTrip(again)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		resp.Body.Close()
		return nil, fmt.Errorf("kerberos: %s refused the Kerberos login of %s (SPNEGO, as its principal %s): %s; "+
			"is that its principal (the configuration's HTTP principal settings, such as yarn.resourcemanager.webapp.spnego-principal)?",
			req.URL.Host, Name(n.cl), spn, resp.Status)
	}
	return resp, err
}

// challenged reports whether resp asks for a Kerberos login.
func challenged(resp *http.Response) bool {
	if resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	for _, v := range resp.Header.Values("WWW-Authenticate") {
		if f := strings.Fields(v); len(f) > 0 && strings.EqualFold(f[0], "Negotiate") {
			return true
		}
	}
	return false
}
