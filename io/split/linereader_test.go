package split_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/split"
)

type line struct {
	Off  int64
	Text string
}

// referenceLines splits content the obvious way.
func referenceLines(content []byte) []line {
	var out []line
	off := 0
	for off < len(content) {
		end := bytes.IndexByte(content[off:], '\n')
		next := off + end + 1
		if end < 0 {
			end, next = len(content)-off, len(content)
		}
		text := content[off : off+end]
		text = bytes.TrimSuffix(text, []byte("\r"))
		out = append(out, line{int64(off), string(text)})
		off = next
	}
	return out
}

// readSplits reads every split in order and returns all their lines.
func readSplits(t testing.TB, r split.Resolver, splits []split.Split, opts split.ReaderOptions) []line {
	t.Helper()
	var out []line
	for _, s := range splits {
		lr, err := split.Open(context.Background(), r, s, opts)
		if err != nil {
			t.Fatalf("Open(%v): %v", s, err)
		}
		for {
			text, off, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%v: Next: %v", s, err)
			}
			if off < s.Start || off >= s.Start+s.Length {
				t.Fatalf("%v returned a line at %d, outside its range", s, off)
			}
			out = append(out, line{off, string(text)})
		}
		if err := lr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func cut(uri string, size, step int64) []split.Split {
	var out []split.Split
	for start := int64(0); start < size; start += step {
		out = append(out, split.Split{URI: uri, Start: start, Length: min(step, size-start), FileSize: size})
	}
	return out
}

var lineCases = []struct {
	name    string
	content string
}{
	{"empty", ""},
	{"one newline", "\n"},
	{"no trailing newline", "abc\ndef"},
	{"trailing newline", "abc\ndef\n"},
	{"empty lines", "\n\na\n\n\nb\n\n"},
	{"crlf", "a\r\nbb\r\n\r\nccc\r\n"},
	{"lone cr kept inside", "a\rb\nc\r"},
	{"long lines", strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 37) + "\nz\n" + strings.Repeat("w", 64)},
	{"one long line", strings.Repeat("q", 300)},
	{"numbers", func() string {
		var b strings.Builder
		for i := range 200 {
			fmt.Fprintf(&b, "%d %s\n", i, strings.Repeat("n", i%23))
		}
		return b.String()
	}()},
}

// TestEveryLineOnce reads each case at every split size from 1 byte to
// past the file's size, with a tiny buffer (so that lines cross buffer
// refills) and with the default one.
func TestEveryLineOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range lineCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := memFS{files: map[string][]byte{"f": []byte(tc.content)}}
			want := referenceLines([]byte(tc.content))
			n := int64(len(tc.content))
			for _, opts := range []split.ReaderOptions{{BufferSize: 16}, {}} {
				for step := int64(1); step <= n+1; step++ {
					got := readSplits(t, m, cut("mem://f", n, step), opts)
					if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
						t.Fatalf("split size %d, buffer %d:\n got %v\nwant %v", step, opts.BufferSize, got, want)
					}
				}
			}
		})
	}
}

func TestLongLinesAreReportedAndSkipped(t *testing.T) {
	t.Parallel()
	content := "short\n" + strings.Repeat("L", 50) + "\r\nafter\n" + strings.Repeat("M", 20) + "\n" + strings.Repeat("N", 21) + "\nend"
	tests := []struct {
		name string
		opts split.ReaderOptions
	}{
		{"line over the buffer", split.ReaderOptions{MaxLineLength: 20, BufferSize: 16}},
		{"line within the buffer", split.ReaderOptions{MaxLineLength: 20, BufferSize: 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := memFS{files: map[string][]byte{"f": []byte(content)}}
			lr, err := split.Open(context.Background(), m, split.Split{URI: "mem://f", Length: int64(len(content)), FileSize: int64(len(content))}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer lr.Close()
			var got []string
			for {
				text, off, err := lr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				var le *split.LineError
				if errors.As(err, &le) && errors.Is(err, split.ErrLineTooLong) {
					got = append(got, fmt.Sprintf("too long at %d", le.Offset))
					if le.URI != "mem://f" || !strings.Contains(err.Error(), "mem://f") {
						t.Errorf("error %v does not name the file", err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%d:%s", off, text))
			}
			want := []string{"0:short", "too long at 6", "58:after", "64:" + strings.Repeat("M", 20), "too long at 85", "107:end"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %q\nwant %q", got, want)
			}
		})
	}
}

func TestGzipIsOneSplit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var plain bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&plain, "line %d\n", i)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes()[:plain.Len()/2])
	zw.Close()
	zw = gzip.NewWriter(&gz) // a second member, as concatenated gzip files have
	zw.Write(plain.Bytes()[plain.Len()/2:])
	zw.Close()
	path := filepath.Join(dir, "data.gz")
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := dfs.NewResolver(conf.HadoopConf{}, "u")
	defer r.Close()
	splits, err := split.Plan(context.Background(), r, []string{path}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 1 || !splits[0].Compressed || splits[0].Length != int64(gz.Len()) {
		t.Fatalf("splits %+v", splits)
	}
	got := readSplitsUnchecked(t, r, splits)
	if want := referenceLines(plain.Bytes()); !reflect.DeepEqual(got, want) {
		t.Errorf("read %d lines, want %d", len(got), len(want))
	}

	// A corrupt stream is an error naming the file.
	bad := append([]byte(nil), gz.Bytes()...)
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	lr, err := split.Open(context.Background(), r, splits[0], split.ReaderOptions{})
	if err == nil {
		defer lr.Close()
		for err == nil {
			_, _, err = lr.Next()
		}
	}
	if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "data.gz") {
		t.Errorf("corrupt gzip: %v", err)
	}
}

// TestCorruptGzip: a gzip file whose contents are at fault (damaged, cut
// short, not gzip, with something else after its members) fails with an
// error that wraps split.ErrCorrupt and names the file, so that the
// worker is not started again to read it (feed.ExitStatus); one whose
// reading fails (the disk, the network) does not: read again, it may
// work.
func TestCorruptGzip(t *testing.T) {
	t.Parallel()
	plain, good := numberedGzip(20000)
	damaged := bytes.Clone(good)
	damaged[len(damaged)/2] ^= 0xff
	tests := []struct {
		name    string
		data    []byte
		failAt  int64 // -1: reading does not fail; -2: it ends early
		corrupt bool
	}{
		{"damaged", damaged, -1, true},
		{"cut short", good[:len(good)/2], -1, true},
		{"cut in its trailer", good[:len(good)-4], -1, true},
		{"cut in its header", good[:5], -1, true},
		{"not gzip", plain, -1, true},
		{"something after it", append(bytes.Clone(good), "trailing text\n"...), -1, true},
		{"a read fails", good, int64(len(good) / 2), false},
		{"a read fails in its header", good, 5, false},
		{"the file ends before its size", good[:len(good)/2], -2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := memFS{files: map[string][]byte{"d.gz": tt.data}}
			if tt.failAt >= 0 {
				m.failAt = map[string]int64{"d.gz": tt.failAt}
			}
			n := int64(len(tt.data))
			if tt.failAt == -2 {
				// Its size is the whole file's: a reader that ends
				// early (a DataNode gone), not a file cut short.
				n = int64(len(good))
				m.size = map[string]int64{"d.gz": n}
			}
			lr, err := split.Open(context.Background(), m, split.Split{URI: "mem://d.gz", Length: n, FileSize: n, Compressed: true}, split.ReaderOptions{})
			if err == nil {
				defer lr.Close()
				for err == nil {
					_, _, err = lr.Next()
				}
			}
			switch {
			case errors.Is(err, io.EOF):
				t.Fatalf("read to its end, want an error")
			case errors.Is(err, split.ErrCorrupt) != tt.corrupt:
				t.Errorf("%v: wraps ErrCorrupt %v, want %v", err, !tt.corrupt, tt.corrupt)
			case !strings.Contains(err.Error(), "mem://d.gz"):
				t.Errorf("%v: does not name the file", err)
			}
		})
	}
}

// numberedGzip returns n lines "line i" and their gzip file.
func numberedGzip(n int) (plain, gz []byte) {
	var p, z bytes.Buffer
	for i := range n {
		fmt.Fprintf(&p, "line %d\n", i)
	}
	zw := gzip.NewWriter(&z)
	zw.Write(p.Bytes())
	zw.Close()
	return p.Bytes(), z.Bytes()
}

// readSplitsUnchecked is readSplits for compressed splits, whose line
// offsets are in the decompressed stream.
func readSplitsUnchecked(t *testing.T, r split.Resolver, splits []split.Split) []line {
	t.Helper()
	var out []line
	for _, s := range splits {
		lr, err := split.Open(context.Background(), r, s, split.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			text, off, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, line{off, string(text)})
		}
		lr.Close()
	}
	return out
}

func TestOpenChecks(t *testing.T) {
	t.Parallel()
	m := memFS{files: map[string][]byte{"f": []byte("abc\ndef\n")}}
	tests := []struct {
		name    string
		s       split.Split
		wantErr string
	}{
		{"size changed", split.Split{URI: "mem://f", Start: 0, Length: 4, FileSize: 9}, "planned"},
		{"range past the end", split.Split{URI: "mem://f", Start: 4, Length: 8, FileSize: 8}, "bad range"},
		{"negative", split.Split{URI: "mem://f", Start: -1, Length: 2, FileSize: 8}, "bad range"},
		{"compressed not at 0", split.Split{URI: "mem://f", Start: 2, Length: 2, FileSize: 8, Compressed: true}, "compressed"},
		{"missing", split.Split{URI: "mem://g", Start: 0, Length: 2, FileSize: 8}, "file does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := split.Open(context.Background(), m, tt.s, split.ReaderOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestContextEndsReading(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	content := strings.Repeat("a line of text\n", 20000)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r := dfs.NewResolver(conf.HadoopConf{}, "u")
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s := split.Split{URI: "file://" + path, Length: int64(len(content)), FileSize: int64(len(content))}
	lr, err := split.Open(ctx, r, s, split.ReaderOptions{BufferSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Close()
	if _, _, err := lr.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for range 1000 { // at most one buffer's worth is still returned
		if _, _, err = lr.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	if _, _, err2 := lr.Next(); !errors.Is(err2, context.Canceled) {
		t.Errorf("the error is not sticky: %v", err2)
	}
}

// FuzzLineReader cuts the input into two splits at every fuzzed point
// (and into splits of a fuzzed size), and checks that the splits
// together return exactly the file's lines, with a buffer small enough
// that lines span refills.
func FuzzLineReader(f *testing.F) {
	for _, tc := range lineCases {
		f.Add([]byte(tc.content), uint16(len(tc.content)/2), uint8(3))
	}
	f.Fuzz(func(t *testing.T, content []byte, at uint16, step uint8) {
		m := memFS{files: map[string][]byte{"f": content}}
		n := int64(len(content))
		want := referenceLines(content)
		opts := split.ReaderOptions{BufferSize: 16, MaxLineLength: 1 << 20}
		c := int64(at) % (n + 1)
		halves := []split.Split{
			{URI: "mem://f", Start: 0, Length: c, FileSize: n},
			{URI: "mem://f", Start: c, Length: n - c, FileSize: n},
		}
		if got := readSplits(t, m, halves, opts); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("halves at %d: got %v, want %v", c, got, want)
		}
		if step > 0 && n > 0 {
			if got := readSplits(t, m, cut("mem://f", n, int64(step)), opts); !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("split size %d: got %v, want %v", step, got, want)
			}
		}
	})
}

func BenchmarkLineReader(b *testing.B) {
	var buf bytes.Buffer
	for buf.Len() < 8<<20 {
		fmt.Fprintf(&buf, "1 %d:0.5 %d:1.25 %d:3\n", buf.Len()%1000, buf.Len()%7777+1000, buf.Len()%99999+10000)
	}
	m := memFS{files: map[string][]byte{"f": buf.Bytes()}}
	s := split.Split{URI: "mem://f", Length: int64(buf.Len()), FileSize: int64(buf.Len())}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	lines := 0
	for b.Loop() {
		lr, err := split.Open(context.Background(), m, s, split.ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, _, err := lr.Next()
			if err != nil {
				break
			}
			lines++
		}
		lr.Close()
	}
	b.ReportMetric(float64(lines)/float64(b.N), "lines/op")
}

// TestLineAt checks that every line a split returns is numbered as it is
// in the whole file, plain at several split sizes and gzip, and that a
// reader that cannot count says so.
func TestLineAt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := dfs.NewResolver(conf.HadoopConf{}, "u")
	defer r.Close()
	check := func(t *testing.T, path string, splits []split.Split, want []line) {
		t.Helper()
		number := make(map[int64]int64, len(want))
		for i, l := range want {
			number[l.Off] = int64(i + 1)
		}
		for _, s := range splits {
			lr, err := split.Open(context.Background(), r, s, split.ReaderOptions{BufferSize: 16})
			if err != nil {
				t.Fatal(err)
			}
			var offs []int64
			for {
				_, off, err := lr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				offs = append(offs, off)
			}
			// In order (reading on), then backwards (from the start again).
			back := slices.Clone(offs)
			slices.Reverse(back)
			for _, off := range append(slices.Clone(offs), back...) {
				if got, ok := lr.LineAt(off); !ok || got != number[off] {
					t.Fatalf("%v: LineAt(%d) = %d, %v; want line %d", s, off, got, ok, number[off])
				}
			}
			lr.Close()
			if len(offs) > 0 {
				if n, ok := lr.LineAt(offs[0]); ok {
					t.Errorf("LineAt after Close = %d, true; want false", n)
				}
			}
		}
	}
	for _, tc := range lineCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			size := int64(len(tc.content))
			for _, step := range []int64{1, 7, 64, size + 1} {
				check(t, path, cut("file://"+path, size, step), referenceLines([]byte(tc.content)))
			}
		})
	}
	t.Run("gzip", func(t *testing.T) {
		plain, gz := numberedGzip(3000)
		path := filepath.Join(dir, "numbered.gz")
		if err := os.WriteFile(path, gz, 0o644); err != nil {
			t.Fatal(err)
		}
		splits, err := split.Plan(context.Background(), r, []string{path}, 100)
		if err != nil {
			t.Fatal(err)
		}
		check(t, path, splits, referenceLines(plain))
	})
	t.Run("cannot count", func(t *testing.T) {
		lr := split.NewLineReader(strings.NewReader("a\nb\n"), "mem", 0, 4, false, split.ReaderOptions{})
		if n, ok := lr.LineAt(2); ok {
			t.Errorf("NewLineReader's LineAt(2) = %d, true; want false (it cannot reopen)", n)
		}
		path := filepath.Join(dir, "short")
		os.WriteFile(path, []byte("a\nb\n"), 0o644)
		lr, err := split.Open(context.Background(), r, split.Split{URI: "file://" + path, Length: 4, FileSize: 4}, split.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer lr.Close()
		if n, ok := lr.LineAt(split.MaxLineCount + 1); ok {
			t.Errorf("LineAt past MaxLineCount = %d, true; want false", n)
		}
		if n, ok := lr.LineAt(100); ok {
			t.Errorf("LineAt past the end of a 4-byte file = %d, true; want false", n)
		}
	})
}
