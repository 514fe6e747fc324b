package split_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/internal/iotest"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
)

func put(t *testing.T, fsys dfs.FileSystem, name string, content []byte, blockSize int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := fsys.Create(ctx, name, dfs.CreateOptions{BlockSize: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// readRecords plans the inputs at splitSize and parses every split.
func readRecords(t *testing.T, r split.Resolver, inputs []string, splitSize int64, opts records.Options) (iotest.Digest, []split.Split, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	splits, err := split.Plan(ctx, r, inputs, splitSize)
	if err != nil {
		t.Fatal(err)
	}
	var d iotest.Digest
	var ex records.Example
	for _, s := range splits {
		lr, err := split.Open(ctx, r, s, split.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rd, err := records.NewReader(lr, opts)
		if err != nil {
			t.Fatal(err)
		}
		for {
			err := rd.Next(&ex)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				lr.Close()
				return d, splits, err
			}
			d.Add(&ex)
		}
		lr.Close()
	}
	return d, splits, nil
}

// TestHadoopEveryRecordOnce writes a libsvm file in 1 KiB HDFS blocks, so
// that records straddle block boundaries, and reads it back through Plan
// and Open at many split sizes: every record exactly once each time.
func TestHadoopEveryRecordOnce(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	content, exs := iotest.GenLibSVM(42, 600)
	name := dir + "/train.libsvm"
	put(t, c.FS, name, content, 1024)
	uri := c.FS.URI(name)
	want := iotest.DigestOf(exs)
	n := int64(len(content))
	t.Logf("%s: %d bytes, %d records, %d blocks of 1 KiB", uri, n, len(exs), (n+1023)/1024)

	if out, ok := hadooptest.HadoopShell(t, "-cat", uri); ok && !bytes.Equal(out, content) {
		t.Fatalf("hdfs dfs -cat returned %d bytes, want the %d written", len(out), n)
	}

	for _, size := range []int64{0, 97, 509, 1000, 1024, 1031, 4093, 4096, 16411, n - 1, n, n + 1} {
		got, splits, err := readRecords(t, c.Resolver, []string{uri}, size, records.Options{Format: records.FormatLibSVM})
		if err != nil {
			t.Fatalf("split size %d: %v", size, err)
		}
		if got != want {
			t.Fatalf("split size %d (%d splits): read %+v, want %+v", size, len(splits), got, want)
		}
		if size == 0 && len(splits) != int((n+1023)/1024) {
			t.Errorf("split size 0 gave %d splits, want one per 1 KiB block", len(splits))
		}
	}
}

// TestHadoopMalformedRecord checks that a bad record is reported with the
// HDFS URI, its line and its byte offset, and skipped within the budget.
func TestHadoopMalformedRecord(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	good, _ := iotest.GenLibSVM(7, 100)
	bad := []byte("1 5:0.5 oops\n")
	content := append(append(append([]byte(nil), good...), '\n'), bad...)
	badAt := int64(len(good) + 1)
	content = append(content, good...)
	put(t, c.FS, dir+"/bad.libsvm", content, 1024)
	uri := c.FS.URI(dir + "/bad.libsvm")

	_, _, err := readRecords(t, c.Resolver, []string{uri}, 777, records.Options{Format: records.FormatLibSVM})
	var re *records.RecordError
	if !errors.As(err, &re) || re.URI != uri || re.Offset != badAt || !errors.Is(err, records.ErrSyntax) {
		t.Fatalf("err = %v, want a RecordError for %s at byte %d", err, uri, badAt)
	}
	t.Logf("%v", err)
	badLine := int64(bytes.Count(content[:badAt], []byte("\n")) + 1)
	if re.Line != badLine || !strings.Contains(err.Error(), fmt.Sprintf("%s, line %d (byte %d)", uri, badLine, badAt)) {
		t.Errorf("error does not name the URI, line %d and byte %d: %v", badLine, badAt, err)
	}
	got, _, err := readRecords(t, c.Resolver, []string{uri}, 777, records.Options{Format: records.FormatLibSVM, MaxBadRecords: 1})
	if err != nil || got.N != 200 {
		t.Errorf("with one bad record allowed: %d records, %v", got.N, err)
	}
}

// TestHadoopGlobAndDirectories plans HDFS inputs given as a directory and
// as globs, with Hadoop's hidden files around.
func TestHadoopGlobAndDirectories(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	for _, name := range []string{"a/part-00000", "a/part-00001", "a/_SUCCESS", "a/.part-00000.crc", "b/part-00000", "b/other"} {
		if err := c.FS.MkdirAll(context.Background(), dir+"/"+name[:1], 0o755); err != nil {
			t.Fatal(err)
		}
		put(t, c.FS, dir+"/"+name, []byte(name+"\n"), 0)
	}
	u := func(name string) string { return c.FS.URI(dir + "/" + name) }
	tests := []struct {
		name   string
		inputs []string
		want   []string
	}{
		{"directory", []string{u("a")}, []string{u("a/part-00000"), u("a/part-00001")}},
		{"hdfs:/// glob", []string{"hdfs://" + dir + "/a/*"}, []string{u("a/part-00000"), u("a/part-00001")}},
		{"glob over directories", []string{u("*/part-*")}, []string{u("a/part-00000"), u("a/part-00001"), u("b/part-00000")}},
		{"character class", []string{u("[b]/*")}, []string{u("b/other"), u("b/part-00000")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			in := tt.inputs
			splits, err := split.Plan(ctx, c.Resolver, in, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range splits {
				got = append(got, s.URI)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Plan(%v) = %v, want %v", in, got, tt.want)
			}
		})
	}
	ctx := context.Background()
	if _, err := split.Plan(ctx, c.Resolver, []string{u("*/nothing-*")}, 1<<20); !errors.Is(err, split.ErrNoMatch) || !strings.Contains(err.Error(), "nothing-*") {
		t.Errorf("a glob matching nothing: %v", err)
	}
}

// TestHadoopGzip reads a gzip file from HDFS as one split.
func TestHadoopGzip(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	content, exs := iotest.GenLibSVM(9, 400)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(content)
	zw.Close()
	put(t, c.FS, dir+"/train.libsvm.gz", gz.Bytes(), 1024)
	got, splits, err := readRecords(t, c.Resolver, []string{c.FS.URI(dir + "/*.gz")}, 100, records.Options{Format: records.FormatLibSVM})
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 1 || !splits[0].Compressed {
		t.Errorf("splits %v", splits)
	}
	if want := iotest.DigestOf(exs); got != want {
		t.Errorf("read %+v, want %+v", got, want)
	}
}

// BenchmarkHadoopSequentialRead reads the HDFS file named by
// SPINDLE_BENCH_HDFS_FILE from start to end, as raw bytes through
// dfs.File and as lines through a LineReader (scripts/bench-hdfs-read.sh
// runs it next to Hadoop's own "hdfs dfs -cat").
func BenchmarkHadoopSequentialRead(b *testing.B) {
	uri := os.Getenv("SPINDLE_BENCH_HDFS_FILE")
	if uri == "" {
		b.Skip("SPINDLE_BENCH_HDFS_FILE is not set (scripts/bench-hdfs-read.sh sets it)")
	}
	c := hadooptest.Connect(b)
	ctx := context.Background()
	fsys, name, err := c.Resolver.Resolve(ctx, uri)
	if err != nil {
		b.Fatal(err)
	}
	fi, err := fsys.Stat(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("reader=file", func(b *testing.B) {
		b.SetBytes(fi.Size())
		buf := make([]byte, 1<<20)
		for b.Loop() {
			f, err := fsys.Open(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, readerOnly{f}, buf)
			f.Close()
			if err != nil || n != fi.Size() {
				b.Fatalf("read %d of %d bytes: %v", n, fi.Size(), err)
			}
		}
	})
	b.Run("reader=lines", func(b *testing.B) {
		b.SetBytes(fi.Size())
		s := split.Split{URI: uri, Length: fi.Size(), FileSize: fi.Size()}
		for b.Loop() {
			lr, err := split.Open(ctx, c.Resolver, s, split.ReaderOptions{})
			if err != nil {
				b.Fatal(err)
			}
			lines := 0
			for {
				_, _, err := lr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				lines++
			}
			lr.Close()
			b.ReportMetric(float64(lines), "lines/op")
		}
	})
}

// BenchmarkHadoopSequentialWrite writes SPINDLE_BENCH_HDFS_WRITE_MB
// (default 256) MiB to the HDFS file named by SPINDLE_BENCH_HDFS_WRITE in
// 1 MiB writes, as a checkpoint or a model is written, replacing it each
// time, and removes it at the end. The data is random, so that a
// compressing link could not flatter it.
func BenchmarkHadoopSequentialWrite(b *testing.B) {
	uri := os.Getenv("SPINDLE_BENCH_HDFS_WRITE")
	if uri == "" {
		b.Skip("SPINDLE_BENCH_HDFS_WRITE is not set")
	}
	mb := 256
	if v := os.Getenv("SPINDLE_BENCH_HDFS_WRITE_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil || mb < 1 {
			b.Fatalf("SPINDLE_BENCH_HDFS_WRITE_MB=%q: want a positive number of MiB", v)
		}
	}
	c := hadooptest.Connect(b)
	ctx := context.Background()
	fsys, name, err := c.Resolver.Resolve(ctx, uri)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if _, err := rand.NewChaCha8([32]byte{1}).Read(buf); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := fsys.Remove(ctx, name); err != nil {
			b.Errorf("remove %s: %v", uri, err)
		}
	})
	b.SetBytes(int64(mb) << 20)
	for b.Loop() {
		w, err := fsys.Create(ctx, name, dfs.CreateOptions{Overwrite: true})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < mb && err == nil; i++ {
			buf[0] = byte(i) // no two MiB alike
			_, err = w.Write(buf)
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatalf("write %s: %v", uri, err)
		}
	}
}

// readerOnly hides WriterTo/ReaderFrom so that io.CopyBuffer uses the
// buffer given.
type readerOnly struct{ io.Reader }
