package creds

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// sampleHex is a real 69-byte container_tokens file written by a YARN
// NodeManager for an ApplicationMaster: one YARN_AM_RM_TOKEN under the empty
// alias, empty service, no secrets.
const sampleHex = "4844545300" + "01" + "00" +
	"15" + "0a0d0a09080d109f81d5b2f32d100110fca7e6b103" +
	"14" + "b1aabc2cb0a9dfb89a17ea5a01bfe9219880 51a1" +
	"10" + "5941524e5f414d5f524d5f544f4b454e" +
	"00" + "00"

func sample(t testing.TB) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(sampleHex, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 69 {
		t.Fatalf("sample is %d bytes, want 69", len(b))
	}
	return b
}

func TestParseSample(t *testing.T) {
	t.Parallel()
	c, err := Read(bytes.NewReader(sample(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tokens) != 1 || len(c.Secrets) != 0 {
		t.Fatalf("got %d tokens, %d secrets; want 1, 0", len(c.Tokens), len(c.Secrets))
	}
	tok, ok := c.Tokens[""]
	if !ok {
		t.Fatal("no token under the empty alias")
	}
	if tok.Kind != KindAMRMToken || tok.Service != "" {
		t.Errorf("kind %q service %q, want %q and empty", tok.Kind, tok.Service, KindAMRMToken)
	}
	if got := base64.StdEncoding.EncodeToString(tok.Identifier); got != "Cg0KCQgNEJ+B1bLzLRABEPyn5rED" {
		t.Errorf("base64(identifier) = %s", got)
	}
	if got := hex.EncodeToString(tok.Password); got != "b1aabc2cb0a9dfb89a17ea5a01bfe921988051a1" {
		t.Errorf("password = %s", got)
	}
	found, ok := c.Find(KindAMRMToken)
	if !ok || !reflect.DeepEqual(found, tok) {
		t.Errorf("Find(%q) = %+v, %v", KindAMRMToken, found, ok)
	}
	if _, ok := c.Find(KindNMToken); ok {
		t.Errorf("Find(%q) found a token", KindNMToken)
	}
	// Writing it back reproduces the file byte for byte.
	var buf bytes.Buffer
	if err := c.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), sample(t)) {
		t.Errorf("Write = %x\nwant    %x", buf.Bytes(), sample(t))
	}
}

func TestTruncatedAtEveryOffset(t *testing.T) {
	t.Parallel()
	inputs := map[string][]byte{"sample": sample(t), "big": mustMarshal(t, bigCreds())}
	for name, full := range inputs {
		for i := range len(full) {
			c, err := Parse(full[:i])
			if err == nil {
				t.Fatalf("%s: Parse of first %d of %d bytes succeeded: %+v", name, i, len(full), c)
			}
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("%s: Parse of first %d bytes: %v, want ErrTruncated", name, i, err)
			}
		}
	}
}

func bigCreds() *Credentials {
	c := New()
	c.Tokens["hdfs://nn:8020"] = Token{
		Identifier: bytes.Repeat([]byte{0xab}, 300),
		Password:   bytes.Repeat([]byte{0x01}, 128),
		Kind:       "HDFS_DELEGATION_TOKEN",
		Service:    "10.0.0.1:8020",
	}
	c.Tokens[""] = Token{Identifier: []byte{1, 2, 3}, Password: []byte{4}, Kind: KindAMRMToken, Service: ""}
	c.Tokens["empty"] = Token{Identifier: []byte{}, Password: []byte{}}
	c.Secrets["key"] = bytes.Repeat([]byte("s"), 200)
	c.Secrets["empty"] = []byte{}
	return c
}

func mustMarshal(t testing.TB, c *Credentials) []byte {
	t.Helper()
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    *Credentials
	}{
		{"empty", New()},
		{"big", bigCreds()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := mustMarshal(t, tt.c)
			got, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.c) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tt.c)
			}
			again := mustMarshal(t, got)
			if !bytes.Equal(again, b) {
				t.Fatalf("second encoding differs")
			}
		})
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	t.Parallel()
	first := mustMarshal(t, bigCreds())
	for range 20 {
		if !bytes.Equal(mustMarshal(t, bigCreds()), first) {
			t.Fatal("encodings differ between runs")
		}
	}
}

func TestFileRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "container_tokens")
	want := bigCreds()
	if err := want.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Overwrite, and leave no temporary files behind.
	if err := New().WriteFile(path); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want 1", len(ents))
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want ErrNotExist", err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	v := func(x int64) string { return hex.EncodeToString(AppendVLong(nil, x)) }
	tests := []struct {
		name string
		hex  string
		want error
	}{
		{"bad magic", "48445458" + "00", ErrBadMagic},
		{"unknown version", "48445453" + "02", ErrVersion},
		{"too many tokens", "4844545300" + v(MaxEntries+1), ErrTooLarge},
		{"too many secrets", "4844545300" + "00" + v(MaxEntries+1), ErrTooLarge},
		{"negative count", "4844545300" + v(-1), ErrMalformed},
		{"huge alias", "4844545300" + "01" + v(1<<31-1), ErrTooLarge},
		{"huge identifier", "4844545300" + "01" + "00" + v(MaxFieldSize+1), ErrTooLarge},
		{"negative identifier length", "4844545300" + "01" + "00" + v(-5), ErrMalformed},
		{"length beyond int32", "4844545300" + "01" + v(1<<40), ErrMalformed},
		{"length larger than input", "4844545300" + "01" + "00" + v(1000) + "0000", ErrTruncated},
		{"v1 truncated length", "4844545301" + "ff", ErrTruncated},
		{"v1 message beyond input", "4844545301" + "10" + "0a00", ErrTruncated},
		{"v1 bad field", "4844545301" + "02" + "0aff", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%s) = %v, want %v", tt.hex, err, tt.want)
			}
		})
	}
}

func TestOversizedLengthDoesNotAllocate(t *testing.T) {
	// Not parallel: it measures the heap.
	in := append([]byte("HDTS\x00\x01\x00"), AppendVLong(nil, MaxFieldSize)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := Parse(in); !errors.Is(err, ErrTruncated) {
			t.Fatalf("Parse = %v, want ErrTruncated", err)
		}
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / 100; perCall > 16<<10 {
		t.Fatalf("Parse allocated %d bytes per call for a 1 MiB length with no data", perCall)
	}
}

func TestReadRejectsHugeStream(t *testing.T) {
	t.Parallel()
	r := &zeroReader{prefix: []byte("HDTS\x00")}
	if _, err := Read(r); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Read = %v, want ErrTooLarge", err)
	}
	if r.n > MaxSize+1+len(r.prefix)+32<<10 {
		t.Fatalf("Read consumed %d bytes", r.n)
	}
}

// zeroReader yields prefix then zeros forever.
type zeroReader struct {
	prefix []byte
	n      int
}

func (z *zeroReader) Read(p []byte) (int, error) {
	n := copy(p, z.prefix)
	z.prefix = z.prefix[n:]
	clear(p[n:])
	z.n += len(p)
	return len(p), nil
}

func TestMarshalLimits(t *testing.T) {
	t.Parallel()
	c := New()
	c.Tokens["x"] = Token{Identifier: make([]byte, MaxFieldSize+1)}
	if _, err := c.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized identifier: %v, want ErrTooLarge", err)
	}
	c = New()
	c.Secrets[strings.Repeat("a", MaxFieldSize+1)] = nil
	if _, err := c.MarshalBinary(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized alias: %v, want ErrTooLarge", err)
	}
}

// appendProtoV1 builds a version 1 file independently of the reader.
func appendProtoV1(c *Credentials) []byte {
	kv := func(alias string, tok *Token, secret []byte) []byte {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, alias)
		if tok != nil {
			var tp []byte
			tp = protowire.AppendTag(tp, 1, protowire.BytesType)
			tp = protowire.AppendBytes(tp, tok.Identifier)
			tp = protowire.AppendTag(tp, 2, protowire.BytesType)
			tp = protowire.AppendBytes(tp, tok.Password)
			tp = protowire.AppendTag(tp, 3, protowire.BytesType)
			tp = protowire.AppendString(tp, tok.Kind)
			tp = protowire.AppendTag(tp, 4, protowire.BytesType)
			tp = protowire.AppendString(tp, tok.Service)
			m = protowire.AppendTag(m, 2, protowire.BytesType)
			m = protowire.AppendBytes(m, tp)
		}
		if secret != nil {
			m = protowire.AppendTag(m, 3, protowire.BytesType)
			m = protowire.AppendBytes(m, secret)
		}
		return m
	}
	var msg []byte
	// An unknown varint field, which the reader must skip.
	msg = protowire.AppendTag(msg, 9, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 300)
	for _, a := range sortedKeys(c.Tokens) {
		tok := c.Tokens[a]
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendBytes(msg, kv(a, &tok, nil))
	}
	for _, a := range sortedKeys(c.Secrets) {
		msg = protowire.AppendTag(msg, 2, protowire.BytesType)
		msg = protowire.AppendBytes(msg, kv(a, nil, c.Secrets[a]))
	}
	b := append([]byte("HDTS"), VersionProtobuf)
	return protowire.AppendBytes(b, msg)
}

func TestParseProtobufVersion(t *testing.T) {
	t.Parallel()
	want := bigCreds()
	in := appendProtoV1(want)
	got, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range len(in) {
		if _, err := Parse(in[:i]); err == nil {
			t.Fatalf("Parse of first %d of %d bytes succeeded", i, len(in))
		}
	}
	// Trailing bytes after the delimited message are ignored.
	if _, err := Parse(append(in, 0xff, 0xff)); err != nil {
		t.Fatalf("trailing bytes: %v", err)
	}
}

func TestTokenWritable(t *testing.T) {
	t.Parallel()
	c, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	tok := c.Tokens[""]
	b, err := tok.EncodeWritable()
	if err != nil {
		t.Fatal(err)
	}
	// The token occupies the sample from after the empty alias to before the
	// secret count.
	if want := sample(t)[7 : 69-1]; !bytes.Equal(b, want) {
		t.Fatalf("EncodeWritable = %x, want %x", b, want)
	}
	back, err := DecodeWritable(b)
	if err != nil || !reflect.DeepEqual(back, tok) {
		t.Fatalf("DecodeWritable = %+v, %v", back, err)
	}
	if _, err := DecodeWritable(append(b, 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("trailing byte: %v, want ErrMalformed", err)
	}
	for i := range len(b) {
		if _, err := DecodeWritable(b[:i]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("DecodeWritable of %d bytes: %v, want ErrTruncated", i, err)
		}
	}
}

func TestTokenURLString(t *testing.T) {
	t.Parallel()
	c, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	tok := c.Tokens[""]
	s, err := tok.EncodeURLString()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.EncodeWritable()
	if want := base64.RawURLEncoding.EncodeToString(raw); s != want {
		t.Fatalf("EncodeURLString = %s, want %s", s, want)
	}
	if strings.ContainsAny(s, "+/=") {
		t.Fatalf("EncodeURLString = %s: not URL-safe and unpadded", s)
	}
	for _, in := range []string{s, base64.StdEncoding.EncodeToString(raw), base64.URLEncoding.EncodeToString(raw)} {
		back, err := DecodeURLString(in)
		if err != nil || !reflect.DeepEqual(back, tok) {
			t.Fatalf("DecodeURLString(%s) = %+v, %v", in, back, err)
		}
	}
	if _, err := DecodeURLString("!!!"); !errors.Is(err, ErrMalformed) {
		t.Errorf("DecodeURLString(!!!) = %v, want ErrMalformed", err)
	}
}

func TestFindDeterministic(t *testing.T) {
	t.Parallel()
	c := New()
	c.Tokens["b"] = Token{Kind: KindNMToken, Service: "b"}
	c.Tokens["a"] = Token{Kind: KindNMToken, Service: "a"}
	for range 10 {
		if tok, ok := c.Find(KindNMToken); !ok || tok.Service != "a" {
			t.Fatalf("Find = %+v, %v; want the token under alias a", tok, ok)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(sample(f))
	f.Add(mustMarshal(f, bigCreds()))
	f.Add(mustMarshal(f, New()))
	f.Add(appendProtoV1(bigCreds()))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := c.Write(&buf); err != nil {
			t.Fatalf("Write of parsed credentials: %v", err)
		}
		c2, err := Read(&buf)
		if err != nil {
			t.Fatalf("Read of written credentials: %v", err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed credentials:\n%+v\n%+v", c, c2)
		}
	})
}
