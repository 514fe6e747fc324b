package yarnclient

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/yarn"
)

var amStatusURLRE = regexp.MustCompile(`status_url="?(http://[^"\s]+)`)

// TestHadoopStatusPageThroughProxyOnly runs a job with ps-submit and reads
// its status page: through the ResourceManager's web proxy it is served;
// asked directly from an address that is not the proxy's (127.0.0.2 on
// loopback, as the mini cluster's proxy is 127.0.0.1) it is not, and the
// browser is sent to the proxy.
func TestHadoopStatusPageThroughProxyOnly(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	rm, err := yarn.NewRMClient(context.Background(), cl.Conf, yarn.Identity{User: cl.User})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--cluster", "yarn", "-n", "1", "-s", "0", "--worker-memory", "128m",
		"--detach", "--jobname", "spindle-proxy", "--", "/bin/sh", "-c", "sleep 60")
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ps-submit: %v\n%s", err, out.String())
	}
	app := submittedApp(t, out.String())
	t.Cleanup(func() {
		kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer kcancel()
		_, _ = rm.Kill(kctx, app)
	})

	// The AM's own address, from its log, and the proxy's URL.
	var direct, proxied string
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for direct == "" || proxied == "" {
		select {
		case <-ctx.Done():
			t.Fatalf("no status page for %v (direct %q, proxied %q)", app, direct, proxied)
		case <-tick.C:
		}
		r, err := rm.ApplicationReport(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		if r.State.Terminal() {
			t.Fatalf("application ended %v: %s", r.State, r.Diagnostics)
		}
		if r.State == yarn.AppRunning && strings.HasPrefix(r.TrackingURL, "http") && strings.Contains(r.TrackingURL, "/proxy/") {
			proxied = strings.TrimSuffix(r.TrackingURL, "/") + "/status.json"
			// The mini cluster's RM names its web address before binding
			// it (localhost:0): use the address the client knows.
			if u, err := url.Parse(proxied); err == nil && u.Port() == "0" {
				if web, ok := cl.Conf.Get("yarn.resourcemanager.webapp.address"); ok && web != "" {
					u.Host = web
					proxied = u.String()
				}
			}
		}
		for _, s := range hadooptest.ContainerFiles(t, app.String(), "stderr") {
			if m := amStatusURLRE.FindStringSubmatch(s); m != nil {
				direct = m[1] + "status.json"
			}
		}
	}
	get := func(u string, from net.IP) (*http.Response, string, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		if from != nil {
			d.LocalAddr = &net.TCPAddr{IP: from}
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, "", err
		}
		req.AddCookie(&http.Cookie{Name: "checked_" + app.String(), Value: "true"})
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	// Through the proxy (which reaches the AM from 127.0.0.1).
	var body string
	for {
		resp, b, err := get(proxied, nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			body = b
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the proxy never served the page: %v %v", err, b)
		case <-tick.C:
		}
	}
	if !strings.Contains(body, `"spindle-proxy"`) {
		t.Errorf("the page through the proxy: %s", body)
	}
	// Directly, from another address.
	resp, b, err := get(direct, net.ParseIP("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK || strings.Contains(b, "spindle-proxy") {
		t.Fatalf("a direct request got %s: %s", resp.Status, b)
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.Contains(loc, "/proxy/"+app.String()+"/status.json") {
		t.Errorf("a direct request got %s to %q, want a redirect to the proxy", resp.Status, loc)
	}
	t.Logf("proxy %s: served; direct %s from 127.0.0.2: %s to %s", proxied, direct, resp.Status, resp.Header.Get("Location"))
}
