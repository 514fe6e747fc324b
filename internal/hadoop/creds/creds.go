package creds

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	// TokenFileEnv names the environment variable through which the
	// NodeManager tells a container where its credentials file is.
	TokenFileEnv = "HADOOP_TOKEN_FILE_LOCATION"
	// KindAMRMToken is the kind of the token an ApplicationMaster uses with
	// the ResourceManager's scheduler (ApplicationMasterProtocol).
	KindAMRMToken = "YARN_AM_RM_TOKEN"
	// KindNMToken is the kind of the token an ApplicationMaster uses with a
	// NodeManager (ContainerManagementProtocol).
	KindNMToken = "NMToken"
	// KindContainerToken is the kind of the token that authorises starting
	// one container.
	KindContainerToken = "ContainerToken"
)

// Limits applied when reading and writing. Real files are a few hundred
// bytes; the limits only stop hostile or corrupt input from allocating.
const (
	MaxFieldSize = 1 << 20  // bytes in any one identifier, password, kind, service, alias or secret
	MaxEntries   = 1000     // tokens, and separately secrets, in one file
	MaxSize      = 16 << 20 // bytes in a whole credentials file
)

// Storage format versions (Credentials.SerializedFormat).
const (
	VersionWritable = 0 // Hadoop Writable encoding; what Hadoop writes by default
	VersionProtobuf = 1 // varint-delimited CredentialsProto
)

var magic = []byte("HDTS")

// Sentinel errors; decode errors wrap one of these.
var (
	ErrBadMagic  = errors.New("creds: not a credentials file (bad magic)")
	ErrVersion   = errors.New("creds: unsupported credentials version")
	ErrTruncated = errors.New("creds: truncated input")
	ErrTooLarge  = errors.New("creds: length exceeds limit")
	ErrMalformed = errors.New("creds: malformed input")
	errNegLength = fmt.Errorf("%w: negative length", ErrMalformed)
	errProtobuf  = fmt.Errorf("%w: protobuf", ErrMalformed)
)

// Token is a Hadoop security token (org.apache.hadoop.security.token.Token).
// Kind and Service are Hadoop Text values and are kept as raw bytes.
type Token struct {
	Identifier []byte
	Password   []byte
	Kind       string
	Service    string
}

// Credentials is the content of a Hadoop credentials file.
type Credentials struct {
	Tokens  map[string]Token  // alias → token
	Secrets map[string][]byte // alias → secret key
}

// New returns empty Credentials.
func New() *Credentials {
	return &Credentials{Tokens: map[string]Token{}, Secrets: map[string][]byte{}}
}

// Find returns a token of the given kind. If several match, the one with the
// smallest alias is returned, so the choice is deterministic.
func (c *Credentials) Find(kind string) (Token, bool) {
	for _, a := range sortedKeys(c.Tokens) {
		if t := c.Tokens[a]; t.Kind == kind {
			return t, true
		}
	}
	return Token{}, false
}

// Read reads a credentials file of either version from r. It reads at most
// MaxSize+1 bytes and ignores bytes after the end of the credentials, as
// Hadoop does.
func Read(r io.Reader) (*Credentials, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("creds: read: %w", err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: file larger than %d bytes", ErrTooLarge, MaxSize)
	}
	return Parse(b)
}

// Parse decodes credentials of either version from b. The result does not
// alias b.
func Parse(b []byte) (*Credentials, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: input larger than %d bytes", ErrTooLarge, MaxSize)
	}
	if len(b) < len(magic) {
		return nil, ErrTruncated
	}
	if !bytes.Equal(b[:len(magic)], magic) {
		return nil, ErrBadMagic
	}
	if len(b) < len(magic)+1 {
		return nil, ErrTruncated
	}
	d := &decoder{r: bytes.NewReader(b[len(magic)+1:])}
	switch v := b[len(magic)]; v {
	case VersionWritable:
		return d.writable()
	case VersionProtobuf:
		return d.protobuf()
	default:
		return nil, fmt.Errorf("%w: %d", ErrVersion, v)
	}
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler with [Parse].
func (c *Credentials) UnmarshalBinary(b []byte) error {
	p, err := Parse(b)
	if err != nil {
		return err
	}
	*c = *p
	return nil
}

// ReadFile reads the credentials file at path.
func ReadFile(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("creds: %w", err)
	}
	defer f.Close()
	c, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// MarshalBinary encodes c in version 0 (Writable), the form Hadoop writes to
// container_tokens and ContainerLaunchContextProto.tokens:
//
//	"HDTS" 0x00
//	VInt numTokens,  then per token (aliases in sorted order):  Text alias, Token
//	VInt numSecrets, then per secret (aliases in sorted order): Text alias, VInt len, len bytes
//
//	Token := VInt idLen, id, VInt pwLen, pw, Text kind, Text service
//	Text  := VInt len, bytes
//
// It fails if c exceeds the limits Read enforces.
func (c *Credentials) MarshalBinary() ([]byte, error) {
	if len(c.Tokens) > MaxEntries || len(c.Secrets) > MaxEntries {
		return nil, fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxEntries)
	}
	b := append([]byte(nil), magic...)
	b = append(b, VersionWritable)
	b = AppendVLong(b, int64(len(c.Tokens)))
	for _, a := range sortedKeys(c.Tokens) {
		if len(a) > MaxFieldSize {
			return nil, fmt.Errorf("%w: alias of %d bytes", ErrTooLarge, len(a))
		}
		b = appendBytes(b, []byte(a))
		var err error
		if b, err = c.Tokens[a].appendWritable(b); err != nil {
			return nil, fmt.Errorf("token %q: %w", a, err)
		}
		if len(b) > MaxSize {
			return nil, fmt.Errorf("%w: encoding larger than %d bytes", ErrTooLarge, MaxSize)
		}
	}
	b = AppendVLong(b, int64(len(c.Secrets)))
	for _, a := range sortedKeys(c.Secrets) {
		s := c.Secrets[a]
		if len(a) > MaxFieldSize || len(s) > MaxFieldSize {
			return nil, fmt.Errorf("%w: secret %q", ErrTooLarge, a)
		}
		b = appendBytes(b, []byte(a))
		b = appendBytes(b, s)
		if len(b) > MaxSize {
			return nil, fmt.Errorf("%w: encoding larger than %d bytes", ErrTooLarge, MaxSize)
		}
	}
	return b, nil
}

// Write writes c to w in version 0 (see [Credentials.MarshalBinary]).
func (c *Credentials) Write(w io.Writer) error {
	b, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("creds: write: %w", err)
	}
	return nil
}

// WriteFile writes c to path with mode 0600, atomically: it writes a
// temporary file in the same directory, syncs it and renames it over path.
func (c *Credentials) WriteFile(path string) error {
	b, err := c.MarshalBinary()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("creds: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("creds: write %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("creds: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("creds: write %s: %w", path, err)
	}
	return nil
}

// EncodeWritable returns t in Hadoop's Token Writable form:
// VInt idLen, id, VInt pwLen, pw, Text kind, Text service.
func (t Token) EncodeWritable() ([]byte, error) {
	return t.appendWritable(nil)
}

func (t Token) appendWritable(b []byte) ([]byte, error) {
	if len(t.Identifier) > MaxFieldSize || len(t.Password) > MaxFieldSize ||
		len(t.Kind) > MaxFieldSize || len(t.Service) > MaxFieldSize {
		return nil, fmt.Errorf("%w: token field larger than %d bytes", ErrTooLarge, MaxFieldSize)
	}
	b = appendBytes(b, t.Identifier)
	b = appendBytes(b, t.Password)
	b = appendBytes(b, []byte(t.Kind))
	b = appendBytes(b, []byte(t.Service))
	return b, nil
}

// DecodeWritable decodes a Token Writable that fills all of b.
func DecodeWritable(b []byte) (Token, error) {
	d := &decoder{r: bytes.NewReader(b)}
	t, err := d.token()
	if err != nil {
		return Token{}, err
	}
	if d.r.Len() != 0 {
		return Token{}, fmt.Errorf("%w: %d trailing bytes after token", ErrMalformed, d.r.Len())
	}
	return t, nil
}

// EncodeURLString returns the string form Hadoop's Token.encodeToUrlString
// produces: the Writable form in URL-safe base64 without padding.
func (t Token) EncodeURLString() (string, error) {
	b, err := t.EncodeWritable()
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeURLString parses the form produced by [Token.EncodeURLString]
// (Token.decodeFromUrlString). Like Hadoop's decoder it also accepts the
// standard alphabet and padding.
func DecodeURLString(s string) (Token, error) {
	if len(s) > base64.RawURLEncoding.EncodedLen(MaxSize) {
		return Token{}, fmt.Errorf("%w: encoded token of %d bytes", ErrTooLarge, len(s))
	}
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return DecodeWritable(b)
}

func appendBytes(b, s []byte) []byte {
	b = AppendVLong(b, int64(len(s)))
	return append(b, s...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decoder reads Writable and protobuf fields from an in-memory input, so
// every length can be checked against the bytes actually left before
// anything is allocated.
type decoder struct {
	r *bytes.Reader
}

func (d *decoder) writable() (*Credentials, error) {
	c := New()
	n, err := d.count("tokens")
	if err != nil {
		return nil, err
	}
	for i := range n {
		alias, err := d.bytes()
		if err != nil {
			return nil, fmt.Errorf("token %d alias: %w", i, err)
		}
		t, err := d.token()
		if err != nil {
			return nil, fmt.Errorf("token %d: %w", i, err)
		}
		c.Tokens[string(alias)] = t
	}
	if n, err = d.count("secrets"); err != nil {
		return nil, err
	}
	for i := range n {
		alias, err := d.bytes()
		if err != nil {
			return nil, fmt.Errorf("secret %d alias: %w", i, err)
		}
		s, err := d.bytes()
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i, err)
		}
		c.Secrets[string(alias)] = s
	}
	return c, nil
}

func (d *decoder) token() (Token, error) {
	var t Token
	var err error
	if t.Identifier, err = d.bytes(); err != nil {
		return Token{}, fmt.Errorf("identifier: %w", err)
	}
	if t.Password, err = d.bytes(); err != nil {
		return Token{}, fmt.Errorf("password: %w", err)
	}
	kind, err := d.bytes()
	if err != nil {
		return Token{}, fmt.Errorf("kind: %w", err)
	}
	service, err := d.bytes()
	if err != nil {
		return Token{}, fmt.Errorf("service: %w", err)
	}
	t.Kind, t.Service = string(kind), string(service)
	return t, nil
}

func (d *decoder) vint() (int32, error) {
	v, err := ReadVInt(d.r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, ErrTruncated
	}
	if errors.Is(err, ErrVIntRange) {
		return 0, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return v, err
}

func (d *decoder) vlong() (int64, error) {
	v, err := ReadVLong(d.r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, ErrTruncated
	}
	return v, err
}

func (d *decoder) count(what string) (int, error) {
	n, err := d.vint()
	if err != nil {
		return 0, fmt.Errorf("number of %s: %w", what, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("number of %s: %w", what, errNegLength)
	}
	if n > MaxEntries {
		return 0, fmt.Errorf("%w: %d %s (at most %d)", ErrTooLarge, n, what, MaxEntries)
	}
	return int(n), nil
}

// bytes reads VInt length-prefixed bytes (Text, or a byte array).
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.vint()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, errNegLength
	}
	return d.take(int(n))
}

func (d *decoder) take(n int) ([]byte, error) {
	if n > MaxFieldSize {
		return nil, fmt.Errorf("%w: field of %d bytes (at most %d)", ErrTooLarge, n, MaxFieldSize)
	}
	if n > d.r.Len() {
		return nil, ErrTruncated
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, ErrTruncated
	}
	return b, nil
}
