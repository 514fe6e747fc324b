package dfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
)

// BlockLocation is where one block of a file is stored.
type BlockLocation struct {
	// Offset and Length are the block's byte range in the file.
	Offset, Length int64
	// Hosts are the DataNodes holding a replica, by host name and by IP
	// address (both, when they differ).
	Hosts []string
	// Racks are those DataNodes' racks ("/default-rack").
	Racks []string
}

// Locator finds which hosts store the blocks of HDFS files, for placing
// work beside its data. It asks the NameNode's WebHDFS API
// (GETFILEBLOCKLOCATIONS): github.com/colinmarc/hdfs does not expose block
// locations. They are a hint, so a cluster whose WebHDFS is off, or
// refuses the Locator, just yields no locations. A Locator of a Resolver
// (Resolver.Locator) authenticates as the Resolver's HDFS clients do;
// one from NewLocator as a user (simple authentication).
type Locator struct {
	hc     conf.HadoopConf
	user   string
	client *http.Client
	r      *Resolver // nil for simple authentication
}

// Bounds of the Locator's answers.
const (
	// locateTimeout bounds one WebHDFS call.
	locateTimeout = 10 * time.Second
	// maxLocationsBytes bounds one answer's size.
	maxLocationsBytes = 16 << 20
)

// NewLocator returns a Locator for the NameNodes hc names, asking as
// user.
func NewLocator(hc conf.HadoopConf, user string) *Locator {
	return &Locator{hc: hc, user: user, client: &http.Client{Timeout: locateTimeout}}
}

// Locator returns a Locator that authenticates to a Kerberos-secured
// HDFS as r's clients of it do: with their delegation token (WebHDFS's
// delegation parameter) or their Kerberos login (SPNEGO, as
// dfs.web.authentication.kerberos.principal names the NameNode's web
// server, HTTP/_HOST unless set); elsewhere as r's user.
func (r *Resolver) Locator() *Locator {
	l := NewLocator(r.hc, r.user)
	l.r = r
	return l
}

// auth sets how the request for the blocks of uri authenticates: q's
// parameters, and the client that sends it.
func (l *Locator) auth(ctx context.Context, uri string, q url.Values) (*http.Client, error) {
	if l.user != "" {
		q.Set("user.name", l.user)
	}
	if l.r == nil {
		return l.client, nil
	}
	fsys, _, err := l.r.Resolve(ctx, uri)
	if err != nil {
		return nil, err
	}
	h, ok := fsys.(*HDFS)
	if !ok || !h.opts.Kerberos {
		return l.client, nil
	}
	q.Del("user.name") // who asks is in the token or the ticket
	if t := h.token.Load(); t != nil {
		s, err := t.EncodeURLString()
		if err != nil {
			return nil, fmt.Errorf("dfs: delegation token of %s: %w", h.URI("/"), err)
		}
		q.Set("delegation", s)
		return l.client, nil
	}
	principal := l.hc.GetDefault("dfs.web.authentication.kerberos.principal", kerberos.DefaultHTTPPrincipal)
	return &http.Client{Timeout: locateTimeout, Transport: kerberos.Transport(nil, h.opts.Login, principal)}, nil
}

// httpAddr is the WebHDFS address of the NameNode of authority (host:port
// of its RPC, or an HA nameservice, whose first NameNode is asked).
func (l *Locator) httpAddr(authority string) (string, error) {
	if authority == "" {
		du, err := ParseURI(l.hc.DefaultFS())
		if err != nil || du.Authority == "" {
			return "", fmt.Errorf("dfs: no NameNode: fs.defaultFS is %q", l.hc.DefaultFS())
		}
		authority = du.Authority
	}
	if ids, ok := l.hc.Get("dfs.ha.namenodes." + authority); ok {
		for _, id := range strings.Split(ids, ",") {
			if a, ok := l.hc.Get("dfs.namenode.http-address." + authority + "." + strings.TrimSpace(id)); ok && a != "" {
				return a, nil
			}
		}
	}
	if a, ok := l.hc.Get("dfs.namenode.http-address." + authority); ok && a != "" {
		return a, nil
	}
	if a, ok := l.hc.Get("dfs.namenode.http-address"); ok && a != "" {
		host, port, err := net.SplitHostPort(a)
		if err == nil && (host == "0.0.0.0" || host == "") {
			// The NameNode binds every address: reach it at its RPC host.
			h, _, _ := net.SplitHostPort(authority)
			if h == "" {
				h = authority
			}
			return net.JoinHostPort(h, port), nil
		}
		return a, nil
	}
	return "", fmt.Errorf("dfs: no dfs.namenode.http-address for %s", authority)
}

// Blocks returns the block locations of the HDFS file uri, in file
// order.
func (l *Locator) Blocks(ctx context.Context, uri string) ([]BlockLocation, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "hdfs" {
		return nil, fmt.Errorf("dfs: block locations of %s: not an hdfs:// file", uri)
	}
	addr, err := l.httpAddr(u.Authority)
	if err != nil {
		return nil, err
	}
	q := url.Values{"op": {"GETFILEBLOCKLOCATIONS"}, "offset": {"0"}, "length": {"9223372036854775807"}}
	client, err := l.auth(ctx, uri, q)
	if err != nil {
		return nil, fmt.Errorf("dfs: block locations of %s: %w", uri, err)
	}
	target := (&url.URL{Scheme: "http", Host: addr, Path: path.Join("/webhdfs/v1", u.Path), RawQuery: q.Encode()}).String()
	ctx, cancel := context.WithTimeout(ctx, locateTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("dfs: block locations of %s from %s: %w", uri, addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLocationsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dfs: block locations of %s from %s: %w", uri, addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("dfs: block locations of %s from %s: HTTP %s", uri, addr, resp.Status)
	}
	if len(body) > maxLocationsBytes {
		return nil, fmt.Errorf("dfs: block locations of %s from %s: answer over %d bytes", uri, addr, maxLocationsBytes)
	}
	return ParseBlockLocations(body)
}

// maxBlocks bounds the blocks of one answer.
const maxBlocks = 1 << 20

// ParseBlockLocations decodes a WebHDFS GETFILEBLOCKLOCATIONS answer.
func ParseBlockLocations(body []byte) ([]BlockLocation, error) {
	var w struct {
		BlockLocations struct {
			BlockLocation []struct {
				Offset        int64    `json:"offset"`
				Length        int64    `json:"length"`
				Hosts         []string `json:"hosts"`
				Names         []string `json:"names"`
				TopologyPaths []string `json:"topologyPaths"`
			} `json:"BlockLocation"`
		} `json:"BlockLocations"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("dfs: block locations: %w", err)
	}
	bl := w.BlockLocations.BlockLocation
	if len(bl) > maxBlocks {
		return nil, fmt.Errorf("dfs: block locations: %d blocks, more than %d", len(bl), maxBlocks)
	}
	out := make([]BlockLocation, 0, len(bl))
	for _, b := range bl {
		if b.Offset < 0 || b.Length < 0 {
			return nil, errors.New("dfs: block locations: a negative offset or length")
		}
		loc := BlockLocation{Offset: b.Offset, Length: b.Length}
		add := func(list *[]string, s string) {
			if s != "" && !slices.Contains(*list, s) {
				*list = append(*list, s)
			}
		}
		for _, h := range b.Hosts {
			add(&loc.Hosts, h)
		}
		for _, n := range b.Names {
			if h, _, err := net.SplitHostPort(n); err == nil {
				add(&loc.Hosts, h)
			}
		}
		for _, p := range b.TopologyPaths {
			if i := strings.LastIndexByte(p, '/'); i > 0 {
				add(&loc.Racks, p[:i])
			}
		}
		out = append(out, loc)
	}
	return out, nil
}
