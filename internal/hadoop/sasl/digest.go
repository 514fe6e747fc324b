// Package sasl implements the client side of SASL DIGEST-MD5 (RFC 2831) as
// Hadoop's TOKEN authentication uses it: quality of protection "auth"
// only, so nothing is wrapped after the handshake.
package sasl

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MaxChallenge bounds the size of a challenge accepted from a server
// (RFC 2831 §2.1.1 limits it to 2048 bytes).
const MaxChallenge = 2048

// Challenge is a parsed digest-challenge. Directives that may repeat
// (realm, qop options) are collected.
type Challenge struct {
	Realms    []string
	Nonce     string
	QOP       []string
	Charset   string
	Algorithm string
}

// ParseChallenge parses a digest-challenge: comma-separated
// name=value or name="quoted value" directives.
func ParseChallenge(b []byte) (*Challenge, error) {
	if len(b) > MaxChallenge {
		return nil, fmt.Errorf("sasl: challenge of %d bytes exceeds %d", len(b), MaxChallenge)
	}
	dirs, err := parseDirectives(string(b))
	if err != nil {
		return nil, err
	}
	c := &Challenge{}
	for _, d := range dirs {
		switch d[0] {
		case "realm":
			c.Realms = append(c.Realms, d[1])
		case "nonce":
			if c.Nonce != "" {
				return nil, errors.New("sasl: challenge has more than one nonce")
			}
			c.Nonce = d[1]
		case "qop":
			for _, q := range strings.Split(d[1], ",") {
				c.QOP = append(c.QOP, strings.TrimSpace(q))
			}
		case "charset":
			c.Charset = d[1]
		case "algorithm":
			c.Algorithm = d[1]
		}
	}
	if c.Nonce == "" {
		return nil, errors.New("sasl: challenge has no nonce")
	}
	if c.Algorithm != "md5-sess" {
		return nil, fmt.Errorf("sasl: challenge algorithm %q, want md5-sess", c.Algorithm)
	}
	if len(c.QOP) == 0 {
		c.QOP = []string{"auth"}
	}
	return c, nil
}

// parseDirectives splits `a=b,c="d,e"` into name/value pairs, names
// lower-cased, quoted values unescaped.
func parseDirectives(s string) ([][2]string, error) {
	var out [][2]string
	for {
		s = strings.TrimLeft(s, " \t\r\n,")
		if s == "" {
			return out, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("sasl: malformed challenge directive %q", s)
		}
		name := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val strings.Builder
		if strings.HasPrefix(s, `"`) {
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("sasl: unterminated quoted value for %q", name)
			}
			s = s[i+1:]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val.WriteString(strings.TrimSpace(s[:end]))
			s = s[end:]
		}
		out = append(out, [2]string{name, val.String()})
	}
}

// Digest holds what a client needs to answer a challenge.
type Digest struct {
	Username  string // for Hadoop tokens: base64 of the token identifier
	Password  string // for Hadoop tokens: base64 of the token password
	DigestURI string // protocol "/" serverId; "/default" for Hadoop TOKEN
	CNonce    string // the client nonce, fresh for every exchange
}

// Response computes the digest-response for challenge c, with nc=00000001
// and qop=auth, and the rspauth value the server must send back.
func (d Digest) Response(c *Challenge) (response []byte, rspauth string, err error) {
	hasAuth := false
	for _, q := range c.QOP {
		hasAuth = hasAuth || q == "auth"
	}
	if !hasAuth {
		return nil, "", fmt.Errorf("sasl: server offers qop %v, only auth is supported", c.QOP)
	}
	realm := ""
	if len(c.Realms) > 0 {
		realm = c.Realms[0]
	}
	const nc, qop = "00000001", "auth"
	inner := md5.Sum([]byte(d.Username + ":" + realm + ":" + d.Password))
	a1 := string(inner[:]) + ":" + c.Nonce + ":" + d.CNonce
	kd := func(a2 string) string {
		ha1 := md5.Sum([]byte(a1))
		ha2 := md5.Sum([]byte(a2))
		v := md5.Sum([]byte(hex.EncodeToString(ha1[:]) + ":" + c.Nonce + ":" + nc + ":" + d.CNonce + ":" + qop + ":" + hex.EncodeToString(ha2[:])))
		return hex.EncodeToString(v[:])
	}
	resp := kd("AUTHENTICATE:" + d.DigestURI)
	var b strings.Builder
	if c.Charset == "utf-8" {
		b.WriteString("charset=utf-8,")
	}
	fmt.Fprintf(&b, `username=%s,realm=%s,nonce=%s,nc=%s,cnonce=%s,digest-uri=%s,maxbuf=65536,response=%s,qop=%s`,
		quote(d.Username), quote(realm), quote(c.Nonce), nc, quote(d.CNonce), quote(d.DigestURI), resp, qop)
	return []byte(b.String()), kd(":" + d.DigestURI), nil
}

// VerifyRspAuth checks the server's final "rspauth=<hex>" token.
func VerifyRspAuth(token []byte, want string) error {
	dirs, err := parseDirectives(string(token))
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if d[0] == "rspauth" {
			if subtle.ConstantTimeCompare([]byte(d[1]), []byte(want)) == 1 {
				return nil
			}
			return errors.New("sasl: server rspauth does not match: the server does not know the token password")
		}
	}
	return errors.New("sasl: server sent no rspauth")
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
