package records_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/internal/iotest"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
)

// lines is a LineSource over a string, with real byte offsets.
type lines struct {
	text string
	pos  int
	max  int // a line longer than this is reported as split.ErrLineTooLong
}

func (l *lines) URI() string { return "file:///data/train.libsvm" }

func (l *lines) Next() ([]byte, int64, error) {
	if l.pos >= len(l.text) {
		return nil, 0, io.EOF
	}
	start := l.pos
	end := strings.IndexByte(l.text[start:], '\n')
	if end < 0 {
		end = len(l.text) - start
		l.pos = len(l.text)
	} else {
		l.pos = start + end + 1
	}
	if l.max > 0 && end > l.max {
		return nil, 0, &split.LineError{URI: l.URI(), Offset: int64(start), Err: split.ErrLineTooLong}
	}
	return []byte(l.text[start : start+end]), int64(start), nil
}

func TestReaderBadRecords(t *testing.T) {
	t.Parallel()
	text := "1 1:1\n" + // 0
		"x 1:1\n" + // 6: bad label
		"\n" + // 12
		"0 2:2\n" + // 13
		"1 3:1 3:1\n" + // 19: duplicate
		strings.Repeat("9", 40) + "\n" + // 29: too long
		"1 4:4\n" // 70
	tests := []struct {
		name       string
		maxBad     int
		wantLabels int
		wantBad    int
		wantErrAt  int64 // -1: reads to io.EOF
	}{
		{name: "strict", maxBad: 0, wantLabels: 1, wantBad: 1, wantErrAt: 6},
		{name: "two allowed", maxBad: 2, wantLabels: 2, wantBad: 3, wantErrAt: 29},
		{name: "three allowed", maxBad: 3, wantLabels: 3, wantBad: 3, wantErrAt: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rd, err := records.NewReader(&lines{text: text, max: 30}, records.Options{Format: records.FormatLibSVM, MaxBadRecords: tt.maxBad})
			if err != nil {
				t.Fatal(err)
			}
			var ex records.Example
			good := 0
			for {
				err = rd.Next(&ex)
				if err != nil {
					break
				}
				good++
			}
			if good != tt.wantLabels || rd.Bad() != tt.wantBad {
				t.Errorf("%d good, %d bad; want %d, %d", good, rd.Bad(), tt.wantLabels, tt.wantBad)
			}
			if tt.wantErrAt < 0 {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				if len(rd.BadSamples()) != 3 || rd.BadSamples()[2].Offset != 29 {
					t.Errorf("samples %v", rd.BadSamples())
				}
				return
			}
			var re *records.RecordError
			if !errors.As(err, &re) || re.Offset != tt.wantErrAt || re.URI != "file:///data/train.libsvm" {
				t.Fatalf("err = %v, want a RecordError at byte %d", err, tt.wantErrAt)
			}
			if !strings.Contains(err.Error(), "file:///data/train.libsvm") || !strings.Contains(err.Error(), fmt.Sprint(tt.wantErrAt)) {
				t.Errorf("error text %q names neither the file nor the offset", err)
			}
			if err2 := rd.Next(&ex); !errors.Is(err2, err) {
				t.Errorf("the error is not sticky: %v", err2)
			}
		})
	}
}

// readText reads every record of text with opts, each as "label keys
// vals", and the Reader.
func readText(t *testing.T, text string, opts records.Options) ([]string, *records.Reader) {
	t.Helper()
	rd, err := records.NewReader(&lines{text: text}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var ex records.Example
	var got []string
	for rd.Next(&ex) == nil {
		got = append(got, fmt.Sprint(ex.Label, ex.Keys, ex.Vals))
	}
	return got, rd
}

func TestReaderCSV(t *testing.T) {
	t.Parallel()
	got, _ := readText(t, "label,a,b\n1,0.5,2\n\n0,,3\n", records.Options{Format: records.FormatCSV, CSVHeader: true})
	if want := []string{"1 [1 2] [0.5 2]", "0 [2] [3]"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestReaderLibSVMComments: in libsvm, a line that holds only a comment
// is skipped as a blank one is, and a comment after a record ends it; in
// CSV a '#' is no comment.
func TestReaderLibSVMComments(t *testing.T) {
	t.Parallel()
	got, rd := readText(t, "# written by a tool\n1 qid:2 3:1 # first\n  \t# indented\n\n0 4:2\n", records.Options{Format: records.FormatLibSVM})
	if want := []string{"1 [3] [1]", "0 [4] [2]"}; fmt.Sprint(got) != fmt.Sprint(want) || rd.Bad() != 0 {
		t.Errorf("got %q and %d bad records, want %q and none", got, rd.Bad(), want)
	}
	rd, err := records.NewReader(&lines{text: "# a,b\n1,2\n"}, records.Options{Format: records.FormatCSV})
	if err != nil {
		t.Fatal(err)
	}
	var ex records.Example
	if err := rd.Next(&ex); !errors.Is(err, records.ErrSyntax) {
		t.Errorf("a CSV line starting with '#': %v; want it malformed", err)
	}
}

func TestNewReaderValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts records.Options
	}{
		{"unknown format", records.Options{Format: "parquet"}},
		{"negative budget", records.Options{Format: records.FormatLibSVM, MaxBadRecords: -1}},
		{"negative label column", records.Options{Format: records.FormatCSV, CSV: records.CSVOptions{LabelColumn: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := records.NewReader(&lines{}, tt.opts); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// readAll plans the file at splitSize and reads every split.
func readAll(t *testing.T, r split.Resolver, uri string, splitSize int64, opts split.ReaderOptions) iotest.Digest {
	t.Helper()
	ctx := context.Background()
	splits, err := split.Plan(ctx, r, []string{uri}, splitSize)
	if err != nil {
		t.Fatal(err)
	}
	var d iotest.Digest
	var ex records.Example
	for _, s := range splits {
		lr, err := split.Open(ctx, r, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := records.NewReader(lr, records.Options{Format: records.FormatLibSVM})
		if err != nil {
			t.Fatal(err)
		}
		for {
			err := rd.Next(&ex)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("split size %d, %v: %v", splitSize, s, err)
			}
			d.Add(&ex)
		}
		lr.Close()
	}
	return d
}

// TestEveryRecordOnce reads a libsvm file through Plan and Open at every
// split size from 1 byte to the file's size (a small file) and at prime
// sizes (a larger one), and checks the records read against those
// written: same count, same multiset.
func TestEveryRecordOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := dfs.NewResolver(conf.HadoopConf{}, "u")
	t.Cleanup(func() { r.Close() })
	tests := []struct {
		name    string
		records int
		sizes   func(n int64) []int64
		opts    split.ReaderOptions
	}{
		{
			name:    "small file, every size",
			records: 40,
			sizes: func(n int64) []int64 {
				var s []int64
				for i := int64(1); i <= n+1; i++ {
					s = append(s, i)
				}
				return s
			},
			opts: split.ReaderOptions{BufferSize: 16},
		},
		{
			name:    "larger file, prime sizes",
			records: 5000,
			sizes: func(n int64) []int64 {
				return []int64{97, 251, 509, 1021, 4093, 8191, 65521, 131071, n - 1, n, n + 1}
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			content, exs := iotest.GenLibSVM(uint64(i+1), tt.records)
			path := filepath.Join(dir, fmt.Sprintf("train-%d.libsvm", i))
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			want := iotest.DigestOf(exs)
			for _, size := range tt.sizes(int64(len(content))) {
				if got := readAll(t, r, path, size, tt.opts); got != want {
					t.Fatalf("split size %d: read %+v, want %+v", size, got, want)
				}
			}
		})
	}
}

func BenchmarkReader(b *testing.B) {
	content, _ := iotest.GenLibSVM(7, 100000)
	path := filepath.Join(b.TempDir(), "train.libsvm")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		b.Fatal(err)
	}
	r := dfs.NewResolver(conf.HadoopConf{}, "u")
	defer r.Close()
	s := split.Split{URI: "file://" + path, Length: int64(len(content)), FileSize: int64(len(content))}
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	var ex records.Example
	n := 0
	for b.Loop() {
		lr, err := split.Open(context.Background(), r, s, split.ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rd, _ := records.NewReader(lr, records.Options{Format: records.FormatLibSVM})
		for rd.Next(&ex) == nil {
			n++
		}
		lr.Close()
	}
	b.ReportMetric(float64(n)/float64(b.N), "records/op")
}
