// Package sasl implements the client side of SASL DIGEST-MD5 (RFC 2831) as
// Hadoop's TOKEN authentication uses it. Quality of protection "auth"
// leaves the connection as it is after the handshake; "auth-int" and
// "auth-conf" (hadoop.rpc.protection integrity and privacy) protect each
// message after it with a Layer.
package sasl

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxChallenge bounds the size of a challenge accepted from a server
// (RFC 2831 §2.1.1 limits it to 2048 bytes).
const MaxChallenge = 2048

// DefaultMaxBuf is the maxbuf of a challenge without the directive
// (RFC 2831 §2.1.1), and the one a client's response announces.
const DefaultMaxBuf = 65536

// maxMaxBuf is the largest maxbuf RFC 2831 allows (2^24-1).
const maxMaxBuf = 1<<24 - 1

// Challenge is a parsed digest-challenge. Directives that may repeat
// (realm, qop options, cipher options) are collected.
type Challenge struct {
	Realms    []string
	Nonce     string
	QOP       []string
	Ciphers   []string // the cipher options for qop auth-conf
	MaxBuf    int      // the largest wrapped message the server accepts
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
			c.QOP = append(c.QOP, splitList(d[1])...)
		case "cipher":
			c.Ciphers = append(c.Ciphers, splitList(d[1])...)
		case "maxbuf":
			if c.MaxBuf != 0 {
				return nil, errors.New("sasl: challenge has more than one maxbuf")
			}
			n, err := strconv.Atoi(d[1])
			if err != nil || n <= 0 || n > maxMaxBuf || strings.TrimLeft(d[1], "0123456789") != "" {
				return nil, fmt.Errorf("sasl: challenge maxbuf %q is not a number from 1 to %d", d[1], maxMaxBuf)
			}
			c.MaxBuf = n
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
		c.QOP = []string{QOPAuth}
	}
	if c.MaxBuf == 0 {
		c.MaxBuf = DefaultMaxBuf
	}
	return c, nil
}

// splitList splits a comma-separated directive value (qop-options,
// cipher-opts), dropping blanks around and between the items.
func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' || r == '\n' })
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

// The qualities of protection (RFC 2831 §2.1.2.1, qop-value).
const (
	QOPAuth      = "auth"      // authentication only
	QOPIntegrity = "auth-int"  // and integrity of every later message
	QOPPrivacy   = "auth-conf" // and confidentiality as well
)

// The ciphers of qop auth-conf that Respond chooses from, best first.
const (
	CipherRC4  = "rc4"
	Cipher3DES = "3des"
)

// Response computes the digest-response for challenge c, with nc=00000001
// and qop=auth, and the rspauth value the server must send back.
func (d Digest) Response(c *Challenge) (response []byte, rspauth string, err error) {
	response, rspauth, _, err = d.Respond(c, []string{QOPAuth})
	return response, rspauth, err
}

// Respond answers challenge c, with nc=00000001. It chooses the first
// qop of prefer (QOPPrivacy, QOPIntegrity, QOPAuth) that the server
// offers, and for QOPPrivacy the cipher: rc4 if the server offers it,
// else 3des. It returns the digest-response, the rspauth value the
// server must send back, and the Layer that protects the connection's
// later messages (nil for QOPAuth). The Layer must only be used once
// VerifyRspAuth has accepted the server's rspauth.
func (d Digest) Respond(c *Challenge, prefer []string) (response []byte, rspauth string, layer Layer, err error) {
	if c == nil {
		return nil, "", nil, errors.New("sasl: no challenge")
	}
	qop, err := chooseQOP(c.QOP, prefer)
	if err != nil {
		return nil, "", nil, err
	}
	cipher := ""
	if qop == QOPPrivacy {
		if cipher, err = chooseCipher(c.Ciphers); err != nil {
			return nil, "", nil, err
		}
	}
	realm := ""
	if len(c.Realms) > 0 {
		realm = c.Realms[0]
	}
	const nc = "00000001"
	inner := md5.Sum([]byte(d.Username + ":" + realm + ":" + d.Password))
	ha1 := md5.Sum([]byte(string(inner[:]) + ":" + c.Nonce + ":" + d.CNonce))
	// RFC 2831 §2.1.2.1: A2 ends in 32 zeros when a security layer follows.
	a2suffix := ""
	if qop != QOPAuth {
		a2suffix = ":00000000000000000000000000000000"
	}
	kd := func(a2 string) string {
		ha2 := md5.Sum([]byte(a2 + a2suffix))
		v := md5.Sum([]byte(hex.EncodeToString(ha1[:]) + ":" + c.Nonce + ":" + nc + ":" + d.CNonce + ":" + qop + ":" + hex.EncodeToString(ha2[:])))
		return hex.EncodeToString(v[:])
	}
	resp := kd("AUTHENTICATE:" + d.DigestURI)
	var b strings.Builder
	if c.Charset == "utf-8" {
		b.WriteString("charset=utf-8,")
	}
	fmt.Fprintf(&b, `username=%s,realm=%s,nonce=%s,nc=%s,cnonce=%s,digest-uri=%s,maxbuf=%d,response=%s,qop=%s`,
		quote(d.Username), quote(realm), quote(c.Nonce), nc, quote(d.CNonce), quote(d.DigestURI), DefaultMaxBuf, resp, qop)
	if cipher != "" {
		fmt.Fprintf(&b, ",cipher=%s", cipher)
	}
	if qop != QOPAuth {
		if layer, err = newLayer(ha1, qop, cipher, c.MaxBuf); err != nil {
			return nil, "", nil, err
		}
	}
	return []byte(b.String()), kd(":" + d.DigestURI), layer, nil
}

// chooseQOP returns the first of prefer that the server offers.
func chooseQOP(offered, prefer []string) (string, error) {
	if len(prefer) == 0 {
		return "", errors.New("sasl: no qop to choose from")
	}
	for _, p := range prefer {
		switch p {
		case QOPAuth, QOPIntegrity, QOPPrivacy:
		default:
			return "", fmt.Errorf("sasl: unknown qop %q (want %s, %s or %s)", p, QOPPrivacy, QOPIntegrity, QOPAuth)
		}
		for _, o := range offered {
			if strings.EqualFold(o, p) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("sasl: server offers qop %v, the client accepts %v", offered, prefer)
}

// chooseCipher returns rc4 if the server offers it, else 3des.
func chooseCipher(offered []string) (string, error) {
	for _, want := range []string{CipherRC4, Cipher3DES} {
		for _, o := range offered {
			if strings.EqualFold(o, want) {
				return want, nil
			}
		}
	}
	return "", fmt.Errorf("sasl: server offers ciphers %v for auth-conf, the client supports %s and %s", offered, CipherRC4, Cipher3DES)
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
