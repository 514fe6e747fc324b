package dfs

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// URI is a parsed location: a scheme ("hdfs" or "file"), an authority
// (the NameNode's host:port or HA nameservice; empty for "file" and for
// "hdfs:///p") and a path.
type URI struct {
	Scheme    string
	Authority string
	Path      string
}

// ParseURI parses the locations Spindle accepts:
//
//	hdfs://host:port/p   HDFS at host:port (a bare host means port 8020 or an HA nameservice)
//	hdfs:///p            HDFS at the NameNode of fs.defaultFS
//	file:///p, file:/p   the local file system
//	p                    a local path (absolute or relative), unlike Hadoop,
//	                     which would resolve it against fs.defaultFS
//
// The text after the authority is taken literally, without percent
// decoding, so that glob patterns ("[", "?", "*") and spaces pass through;
// "?" and "#" do not start a query or fragment. HDFS paths are cleaned and
// must be absolute. Other schemes are an error.
func ParseURI(s string) (URI, error) {
	if s == "" {
		return URI{}, fmt.Errorf("dfs: empty path")
	}
	scheme, rest, ok := cutScheme(s)
	if !ok {
		return URI{Scheme: "file", Path: filepath.Clean(s)}, nil
	}
	switch scheme {
	case "hdfs":
		if !strings.HasPrefix(rest, "//") {
			return URI{}, fmt.Errorf("dfs: %q: want hdfs://host:port/path or hdfs:///path", s)
		}
		rest = rest[2:]
		auth, p := rest, "/"
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			auth, p = rest[:i], rest[i:]
		}
		if strings.ContainsAny(auth, "@?#* ") {
			return URI{}, fmt.Errorf("dfs: %q: bad authority %q", s, auth)
		}
		return URI{Scheme: "hdfs", Authority: auth, Path: path.Clean(p)}, nil
	case "file":
		p := rest
		if strings.HasPrefix(rest, "//") {
			rest = rest[2:]
			i := strings.IndexByte(rest, '/')
			if i < 0 {
				return URI{}, fmt.Errorf("dfs: %q: no path", s)
			}
			if host := rest[:i]; host != "" && host != "localhost" {
				return URI{}, fmt.Errorf("dfs: %q: file URIs name no host (got %q)", s, host)
			}
			p = rest[i:]
		}
		if p == "" {
			return URI{}, fmt.Errorf("dfs: %q: no path", s)
		}
		return URI{Scheme: "file", Path: filepath.Clean(p)}, nil
	default:
		return URI{}, fmt.Errorf("dfs: %q: unsupported scheme %q (want hdfs or file)", s, scheme)
	}
}

// HasScheme reports whether s starts with a URI scheme ("hdfs:",
// "file:"), rather than being a plain path, which ParseURI takes as
// local.
func HasScheme(s string) bool {
	_, _, ok := cutScheme(s)
	return ok
}

// cutScheme splits "scheme:rest" when s starts with a URI scheme
// (a letter, then letters, digits, "+", "-" or "."). A single letter is
// not taken as a scheme, so that "C:\x" stays a path.
func cutScheme(s string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 2 {
		return "", "", false
	}
	for j := 0; j < i; j++ {
		c := s[j]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case j > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return "", "", false
		}
	}
	return strings.ToLower(s[:i]), s[i+1:], true
}

// String formats the URI: "hdfs://auth/p" or "file:///p"; a relative
// local path is returned as a path ("./" is prepended if it would
// otherwise read as a URI scheme).
func (u URI) String() string {
	switch u.Scheme {
	case "hdfs":
		return "hdfs://" + u.Authority + u.Path
	case "file":
		if filepath.IsAbs(u.Path) {
			return "file://" + filepath.ToSlash(u.Path)
		}
		if _, _, ok := cutScheme(u.Path); ok {
			return "./" + u.Path // "a:b" would read as scheme "a"
		}
		return u.Path
	}
	return u.Scheme + "://" + u.Authority + u.Path
}
