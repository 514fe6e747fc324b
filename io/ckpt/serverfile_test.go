package ckpt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/io/dfs"
)

// record is one key with its values and state, as tests keep them.
type record[V Number] struct {
	key         uint64
	vals, state []V
}

// genRecords returns n records with distinct keys, keys 0 and
// math.MaxUint64 among them (n >= 2), and values that include negative
// zero, infinities and NaN. The output depends only on seed.
func genRecords[V Number](seed uint64, n, dim, sw int) []record[V] {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat32, -1e30}
	val := func() V {
		if rng.IntN(10) == 0 {
			return V(specials[rng.IntN(len(specials))])
		}
		return V(rng.NormFloat64() * 100)
	}
	seen := map[uint64]bool{}
	recs := make([]record[V], 0, n)
	for len(recs) < n {
		var k uint64
		switch len(recs) {
		case 0:
			k = 0
		case n / 2:
			k = math.MaxUint64
		default:
			k = rng.Uint64() >> rng.IntN(64)
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		r := record[V]{key: k, vals: make([]V, dim)}
		for i := range r.vals {
			r.vals[i] = val()
		}
		if sw > 0 {
			r.state = make([]V, dim*sw)
			for i := range r.state {
				r.state[i] = val()
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// seq returns a records iterator over recs.
func seq[V Number](recs []record[V]) func(yield func(uint64, []V, []V) bool) {
	return func(yield func(uint64, []V, []V) bool) {
		for _, r := range recs {
			if !yield(r.key, r.vals, r.state) {
				return
			}
		}
	}
}

// sameBits reports whether a and b hold the same values bit for bit.
func sameBits[V Number](a, b []V) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(float64(a[i])) != math.Float64bits(float64(b[i])) && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

// collect returns a read callback that appends copies of the records to
// *out.
func collect[V Number](out *[]record[V]) func(uint64, []V, []V) error {
	return func(k uint64, vals, state []V) error {
		r := record[V]{key: k, vals: append([]V(nil), vals...)}
		if len(state) > 0 {
			r.state = append([]V(nil), state...)
		}
		*out = append(*out, r)
		return nil
	}
}

// readModes are the two ways readServerFile reads a file: into memory, or
// in two streaming passes.
type readMode struct {
	name     string
	memLimit int64
}

var readModes = []readMode{
	{"mem", memReadLimit},
	{"stream", 0},
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		f64     bool
		dim, sw int
		n       int
	}{
		{"float32/dim=1/sw=0", false, 1, 0, 3000},
		{"float32/dim=1/sw=2", false, 1, 2, 3000},
		{"float32/dim=3/sw=0", false, 3, 0, 3000},
		{"float32/dim=3/sw=2", false, 3, 2, 3000},
		{"float64/dim=1/sw=0", true, 1, 0, 3000},
		{"float64/dim=1/sw=2", true, 1, 2, 3000},
		{"float64/dim=3/sw=0", true, 3, 0, 3000},
		{"float64/dim=3/sw=2", true, 3, 2, 3000},
		{"float32/empty", false, 3, 2, 0},
		{"float64/ctx-checks", true, 1, 1, 3*ctxEvery + 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.f64 {
				roundTrip[float64](t, tt.dim, tt.sw, tt.n)
			} else {
				roundTrip[float32](t, tt.dim, tt.sw, tt.n)
			}
		})
	}
}

func roundTrip[V Number](t *testing.T, dim, sw, n int) {
	ctx := t.Context()
	var recs []record[V]
	if n > 0 {
		recs = genRecords[V](uint64(dim*100+sw*10+n), n, dim, sw)
	}
	dir := t.TempDir()
	name := filepath.Join(dir, "7", ServerFileName(3))
	h := Header{Dim: dim, StateWidth: sw, Records: int64(n)}
	fe, err := WriteServerFile(ctx, dfs.Local{}, name, h, seq(recs))
	if err != nil {
		t.Fatalf("WriteServerFile: %v", err)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := FileEntry{Name: "server-3", Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	if fe != want {
		t.Errorf("WriteServerFile = %+v, want %+v", fe, want)
	}
	h.Elem = elemOf[V]()
	if got := int64(len(data)); got != headerSize+trailerSize+int64(n)*h.recordSize() {
		t.Errorf("file is %d bytes, want %d", got, headerSize+trailerSize+int64(n)*h.recordSize())
	}
	if ents, _ := os.ReadDir(filepath.Dir(name)); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(ents))
	}
	gh, err := ReadHeader(ctx, dfs.Local{}, name)
	if err != nil || gh != h {
		t.Errorf("ReadHeader = %+v, %v; want %+v", gh, err, h)
	}
	modes := slices.Concat(readModes, []readMode{{"exported", -1}})
	for _, m := range modes {
		var got []record[V]
		var gh Header
		var err error
		if m.memLimit < 0 {
			gh, err = ReadServerFile(ctx, dfs.Local{}, name, collect(&got))
		} else {
			gh, err = readServerFile(ctx, dfs.Local{}, name, collect(&got), m.memLimit)
		}
		if err != nil {
			t.Fatalf("%s: read: %v", m.name, err)
		}
		if gh != h {
			t.Errorf("%s: header %+v, want %+v", m.name, gh, h)
		}
		if len(got) != len(recs) {
			t.Fatalf("%s: read %d records, want %d", m.name, len(got), len(recs))
		}
		for i := range recs {
			if got[i].key != recs[i].key || !sameBits(got[i].vals, recs[i].vals) || !sameBits(got[i].state, recs[i].state) {
				t.Fatalf("%s: record %d = %v, want %v", m.name, i, got[i], recs[i])
			}
		}
	}
}

// failFS is a local file system whose writers fail after failAfter bytes
// (when failAfter >= 0) and whose Rename fails when failRename is set.
type failFS struct {
	dfs.Local
	failAfter  int
	failRename bool
}

var errInjected = errors.New("injected failure")

func (f failFS) Create(ctx context.Context, name string, opts dfs.CreateOptions) (dfs.Writer, error) {
	w, err := f.Local.Create(ctx, name, opts)
	if err != nil || f.failAfter < 0 {
		return w, err
	}
	return &failWriter{Writer: w, left: f.failAfter}, nil
}

func (f failFS) Rename(ctx context.Context, oldname, newname string) error {
	if f.failRename {
		return errInjected
	}
	return f.Local.Rename(ctx, oldname, newname)
}

type failWriter struct {
	dfs.Writer
	left int
}

func (w *failWriter) Write(b []byte) (int, error) {
	if len(b) > w.left {
		n, _ := w.Writer.Write(b[:w.left])
		w.left = 0
		return n, errInjected
	}
	w.left -= len(b)
	return w.Writer.Write(b)
}

func TestWriteFailureLeavesNoTemp(t *testing.T) {
	t.Parallel()
	const n = 100
	recs := genRecords[float32](1, n, 2, 1)
	errCause := errors.New("source failed")
	tests := []struct {
		name    string
		fsys    dfs.FileSystem
		h       Header
		records func(ctx context.Context, cancel context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool)
		want    []error // the error wraps each
		wantMsg string
	}{
		{
			name: "iterator stops midway",
			records: func(context.Context, context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool) {
				return seq(recs[:n/2])
			},
			wantMsg: "records ended after 50 of the 100 records",
		},
		{
			name: "iterator yields too many",
			records: func(context.Context, context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool) {
				return seq(append(recs[:n:n], recs[0]))
			},
			wantMsg: "more than the 100 records",
		},
		{
			name: "wrong number of values",
			records: func(context.Context, context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool) {
				bad := append([]record[float32](nil), recs...)
				bad[60].vals = bad[60].vals[:1]
				return seq(bad)
			},
			wantMsg: "record 60 (key ",
		},
		{
			name: "wrong number of state values",
			records: func(context.Context, context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool) {
				bad := append([]record[float32](nil), recs...)
				bad[70].state = nil
				return seq(bad)
			},
			wantMsg: "0 state values, want 2",
		},
		{
			name: "context cancelled midway with a cause",
			records: func(_ context.Context, cancel context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool) {
				return func(yield func(uint64, []float32, []float32) bool) {
					for i, r := range recs {
						if i == n/2 {
							cancel(errCause)
						}
						if !yield(r.key, r.vals, r.state) {
							return
						}
					}
				}
			},
			want: []error{context.Canceled, errCause},
		},
		{
			name: "write error",
			fsys: failFS{failAfter: 1000},
			want: []error{errInjected},
		},
		{
			name: "write error in the trailer",
			fsys: failFS{failAfter: headerSize + n*(8+2*2*4) + 2},
			want: []error{errInjected},
		},
		{
			name: "rename error",
			fsys: failFS{failAfter: -1, failRename: true},
			want: []error{errInjected},
		},
		{
			name: "panic in the iterator",
			records: func(context.Context, context.CancelCauseFunc) func(func(uint64, []float32, []float32) bool) {
				return func(yield func(uint64, []float32, []float32) bool) {
					yield(recs[0].key, recs[0].vals, recs[0].state)
					panic("iterator bug")
				}
			},
			wantMsg: "panic: iterator bug",
		},
		{
			name:    "header element type",
			h:       Header{Elem: Float64, Dim: 2, StateWidth: 1, Records: n},
			wantMsg: "header element type float64, values are float32",
		},
		{
			name:    "header dim",
			h:       Header{Dim: 0, StateWidth: 1, Records: n},
			wantMsg: "dim 0, want 1..65536",
		},
		{
			name:    "header state width",
			h:       Header{Dim: 2, StateWidth: 17, Records: n},
			wantMsg: "state width 17, want 0..16",
		},
		{
			name:    "header count",
			h:       Header{Dim: 2, StateWidth: 1, Records: -1},
			wantMsg: "record count -1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			name := filepath.Join(dir, ServerFileName(0))
			// A previous, good file must survive the failed write.
			old, err := WriteServerFile(t.Context(), dfs.Local{}, name, Header{Dim: 2, StateWidth: 1, Records: 3}, seq(recs[:3]))
			if err != nil {
				t.Fatal(err)
			}
			fsys := tt.fsys
			if fsys == nil {
				fsys = dfs.Local{}
			}
			h := tt.h
			if h == (Header{}) {
				h = Header{Dim: 2, StateWidth: 1, Records: n}
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			records := seq(recs)
			if tt.records != nil {
				records = tt.records(ctx, cancel)
			}
			err = func() (err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				_, err = WriteServerFile(ctx, fsys, name, h, records)
				return err
			}()
			if err == nil {
				t.Fatal("WriteServerFile succeeded")
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not wrap %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if tt.wantMsg != "" && !strings.HasPrefix(err.Error(), "ckpt: ") && !strings.HasPrefix(err.Error(), "panic") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 || ents[0].Name() != ServerFileName(0) {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("directory holds %q, want only %q", names, ServerFileName(0))
			}
			n, sum, err := sha256Of(t.Context(), dfs.Local{}, name)
			if err != nil || n != old.Bytes || sum != old.SHA256 {
				t.Errorf("the previous file changed: %d bytes, sha256 %s, %v", n, sum, err)
			}
		})
	}
}

// validFile returns the bytes of a small valid float32 file, dim 3, state
// width 2.
func validFile(t testing.TB) []byte {
	t.Helper()
	name := filepath.Join(t.TempDir(), "f")
	recs := genRecords[float32](42, 20, 3, 2)
	if _, err := WriteServerFile(t.Context(), dfs.Local{}, name, Header{Dim: 3, StateWidth: 2, Records: 20}, seq(recs)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fixCRC rewrites the trailer of b to match the rest, so that a test
// reaches the check it aims at rather than the CRC's.
func fixCRC(b []byte) []byte {
	if len(b) >= trailerSize {
		binary.LittleEndian.PutUint32(b[len(b)-trailerSize:], crc32.Checksum(b[:len(b)-trailerSize], castagnoli))
	}
	return b
}

// edit returns a copy of b changed by fn.
func edit(b []byte, fn func([]byte) []byte) []byte {
	return fn(append([]byte(nil), b...))
}

// expectCorrupt reads data as a server file of type V in every read mode
// and fails unless the read fails with ErrCorrupt before delivering any
// record.
func expectCorrupt[V Number](t *testing.T, data []byte, wantMsg string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "server-0")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range readModes {
		delivered := 0
		_, err := readServerFile(t.Context(), dfs.Local{}, name, func(uint64, []V, []V) error {
			delivered++
			return nil
		}, m.memLimit)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: read = %v, want an error wrapping ErrCorrupt", m.name, err)
		}
		uri := dfs.Local{}.URI(name)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Path != uri {
			t.Errorf("%s: error %q does not name the file %s", m.name, err, uri)
		}
		if !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("%s: error %q does not contain %q", m.name, err, wantMsg)
		}
		if delivered != 0 {
			t.Errorf("%s: %d records delivered from a corrupt file", m.name, delivered)
		}
	}
}

func TestReadCorrupt(t *testing.T) {
	t.Parallel()
	good := validFile(t)
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return fixCRC(b) }
	}
	put64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return fixCRC(b) }
	}
	tests := []struct {
		name    string
		data    []byte
		f64     bool // read as float64
		wantMsg string
	}{
		{"empty", nil, false, "0 bytes, shorter than a header"},
		{"header only", good[:headerSize], false, "shorter than a header and a trailer"},
		{"no records, no trailer", good[:headerSize+trailerSize], false, "does not match the file size"},
		{"wrong magic", edit(good, func(b []byte) []byte { copy(b, "SPCKPT02"); return fixCRC(b) }), false, "bad magic"},
		{"version", edit(good, func(b []byte) []byte { b[8] = 2; return fixCRC(b) }), false, "version 2"},
		{"unknown element type", edit(good, func(b []byte) []byte { b[10] = 3; return fixCRC(b) }), false, "unknown element type 3"},
		{"wrong element type", good, true, "holds float32 values, the reader wants float64"},
		{"wrong element type, claimed float64", edit(good, func(b []byte) []byte { b[10] = byte(Float64); return fixCRC(b) }), false, "does not match the file size"},
		{"reserved byte", edit(good, func(b []byte) []byte { b[11] = 1; return fixCRC(b) }), false, "reserved byte"},
		{"reserved word", edit(good, put32(20, 9)), false, "reserved word"},
		{"dim 0", edit(good, put32(12, 0)), false, "dim 0"},
		{"dim too large", edit(good, put32(12, MaxDim+1)), false, "dim 65537"},
		{"dim absurd", edit(good, put32(12, math.MaxUint32)), false, "dim 4294967295"},
		{"state width too large", edit(good, put32(16, 17)), false, "state width 17"},
		{"state width absurd", edit(good, put32(16, math.MaxUint32)), false, "state width 4294967295"},
		{"dim and width at their limits", edit(good, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[12:], MaxDim)
			binary.LittleEndian.PutUint32(b[16:], MaxStateWidth)
			return fixCRC(b)
		}), false, "does not match the file size"},
		{"count one more", edit(good, put64(24, 21)), false, "record count 21"},
		{"count one less", edit(good, put64(24, 19)), false, "record count 19"},
		{"count absurd", edit(good, put64(24, 1<<62)), false, "record count 4611686018427387904"},
		{"count max", edit(good, put64(24, math.MaxUint64)), false, "record count 18446744073709551615"},
		{"trailing byte", edit(good, func(b []byte) []byte { return fixCRC(append(b, 0, 0, 0, 0)[:len(b)+1]) }), false, "does not match the file size"},
		{"crc", edit(good, func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }), false, "crc mismatch"},
		{"record bytes", edit(good, func(b []byte) []byte { b[headerSize+5] ^= 1; return b }), false, "crc mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.f64 {
				expectCorrupt[float64](t, tt.data, tt.wantMsg)
			} else {
				expectCorrupt[float32](t, tt.data, tt.wantMsg)
			}
		})
	}
	t.Run("truncated at every 7th offset", func(t *testing.T) {
		t.Parallel()
		for off := 0; off < len(good); off += 7 {
			expectCorrupt[float32](t, good[:off], "")
		}
	})
	t.Run("every byte flipped", func(t *testing.T) {
		t.Parallel()
		for off := range good {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				expectCorrupt[float32](t, edit(good, func(b []byte) []byte { b[off] ^= x; return b }), "")
			}
		}
	})
}

// TestReadAllocationBounded checks that a small file whose header claims
// huge dimensions or counts is read or rejected without a large
// allocation. It is not parallel, so that the allocation count is its own.
func TestReadAllocationBounded(t *testing.T) {
	good := validFile(t)
	dir := t.TempDir()
	headers := []struct {
		name    string
		dim, sw uint32
		count   uint64
		valid   bool // an empty file, at the limits
	}{
		{"huge count", 3, 2, 1 << 62, false},
		{"max dim and width", MaxDim, MaxStateWidth, 20, false},
		{"max everything", MaxDim, MaxStateWidth, math.MaxUint64, false},
		{"absurd dim", math.MaxUint32, MaxStateWidth, 1 << 40, false},
		{"empty at the limits", MaxDim, MaxStateWidth, 0, true},
	}
	for _, hd := range headers {
		data := edit(good, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[12:], hd.dim)
			binary.LittleEndian.PutUint32(b[16:], hd.sw)
			binary.LittleEndian.PutUint64(b[24:], hd.count)
			if hd.valid {
				b = b[:headerSize+trailerSize]
			}
			return fixCRC(b)
		})
		name := filepath.Join(dir, strings.ReplaceAll(hd.name, " ", "-"))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, m := range readModes {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := readServerFile(t.Context(), dfs.Local{}, name, func(uint64, []float32, []float32) error { return nil }, m.memLimit)
			runtime.ReadMemStats(&after)
			if hd.valid && err != nil {
				t.Errorf("%s/%s: read = %v, want success", hd.name, m.name, err)
			}
			if !hd.valid && !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s/%s: read = %v, want ErrCorrupt", hd.name, m.name, err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
				t.Errorf("%s/%s: read allocated %d bytes, want < 64 KiB", hd.name, m.name, got)
			}
		}
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	name := filepath.Join(dir, "server-0")
	recs := genRecords[float64](5, 3*ctxEvery, 1, 0)
	if _, err := WriteServerFile(ctx, dfs.Local{}, name, Header{Dim: 1, Records: int64(len(recs))}, seq(recs)); err != nil {
		t.Fatal(err)
	}
	errStop := errors.New("stop")
	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			t.Run("missing file", func(t *testing.T) {
				_, err := readServerFile(ctx, dfs.Local{}, filepath.Join(dir, "nope"), func(uint64, []float64, []float64) error { return nil }, m.memLimit)
				if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) {
					t.Errorf("read = %v, want fs.ErrNotExist and not ErrCorrupt", err)
				}
			})
			t.Run("directory", func(t *testing.T) {
				_, err := readServerFile(ctx, dfs.Local{}, dir, func(uint64, []float64, []float64) error { return nil }, m.memLimit)
				if err == nil || errors.Is(err, ErrCorrupt) {
					t.Errorf("read = %v, want an error other than ErrCorrupt", err)
				}
			})
			t.Run("callback error", func(t *testing.T) {
				calls := 0
				_, err := readServerFile(ctx, dfs.Local{}, name, func(uint64, []float64, []float64) error {
					calls++
					if calls == 10 {
						return errStop
					}
					return nil
				}, m.memLimit)
				if !errors.Is(err, errStop) || !strings.Contains(err.Error(), "record 9 (key ") {
					t.Errorf("read = %v, want errStop at record 9", err)
				}
				if calls != 10 {
					t.Errorf("%d calls after the error, want 10", calls)
				}
			})
			t.Run("context cancelled", func(t *testing.T) {
				cctx, cancel := context.WithCancel(ctx)
				calls := 0
				_, err := readServerFile(cctx, dfs.Local{}, name, func(uint64, []float64, []float64) error {
					calls++
					if calls == ctxEvery/2 {
						cancel()
					}
					return nil
				}, m.memLimit)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("read = %v, want context.Canceled", err)
				}
				if calls > ctxEvery {
					t.Errorf("%d records delivered after cancellation, want at most %d", calls, ctxEvery)
				}
			})
		})
	}
}

// shrunkFS is a local file system whose Files report a size larger than
// what can be read, as a file truncated after it was opened would.
type shrunkFS struct {
	dfs.Local
	size int64
}

func (s shrunkFS) Open(ctx context.Context, name string) (dfs.File, error) {
	f, err := s.Local.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return shrunkFile{f, s.size}, nil
}

type shrunkFile struct {
	dfs.File
	size int64
}

func (f shrunkFile) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	return sizedInfo{fi, f.size}, err
}

type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (fi sizedInfo) Size() int64 { return fi.size }

func TestReadFileShorterThanStat(t *testing.T) {
	t.Parallel()
	good := validFile(t)
	for _, cut := range []int{1, 10, len(good) - headerSize} {
		for _, m := range readModes {
			t.Run(fmt.Sprintf("cut=%d/%s", cut, m.name), func(t *testing.T) {
				t.Parallel()
				name := filepath.Join(t.TempDir(), "server-0")
				if err := os.WriteFile(name, good[:len(good)-cut], 0o644); err != nil {
					t.Fatal(err)
				}
				calls := 0
				_, err := readServerFile(t.Context(), shrunkFS{size: int64(len(good))}, name, func(uint64, []float32, []float32) error {
					calls++
					return nil
				}, m.memLimit)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "file ends early") || calls != 0 {
					t.Errorf("read = %v after %d records, want ErrCorrupt (file ends early) before any", err, calls)
				}
			})
		}
	}
}

func TestElemType(t *testing.T) {
	t.Parallel()
	type myFloat float32
	tests := []struct {
		name string
		got  ElemType
		want ElemType
		str  string
	}{
		{"float32", elemOf[float32](), Float32, "float32"},
		{"float64", elemOf[float64](), Float64, "float64"},
		{"named float32", elemOf[myFloat](), Float32, "float32"},
		{"invalid", 9, 9, "ElemType(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want || tt.got.String() != tt.str {
				t.Errorf("got %v (%q), want %v (%q)", tt.got, tt.got.String(), tt.want, tt.str)
			}
		})
	}
}

// TestHeaderLayout pins the header bytes against the documented layout.
func TestHeaderLayout(t *testing.T) {
	t.Parallel()
	var b [headerSize]byte
	putHeader(b[:], Header{Elem: Float64, Dim: 3, StateWidth: 2, Records: 0x0102030405060708})
	want := []byte("SPCKPT01\x01\x00\x02\x00\x03\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x08\x07\x06\x05\x04\x03\x02\x01")
	if !bytes.Equal(b[:], want) {
		t.Errorf("header = %q, want %q", b[:], want)
	}
}
