package ckpt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// FuzzReadServerFile reads arbitrary bytes as a server file, as float32 and
// as float64, both into memory and in two streaming passes, and checks
// that:
//
//   - nothing panics, and every failure wraps ErrCorrupt (the file exists
//     and is readable, so only its contents can be at fault);
//   - a failed read delivers no record (verify, then deliver);
//   - both read modes agree, and ReadHeader agrees with them;
//   - a file that reads is canonical: writing its records back produces
//     the same bytes.
//
// Allocation is bounded by construction (the header is checked against the
// file's size before anything is sized from it) and by
// TestReadAllocationBounded.
func FuzzReadServerFile(f *testing.F) {
	good := validFile(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(edit(good, func(b []byte) []byte { b[10] = byte(Float64); return fixCRC(b) }))
	f.Add(edit(good, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], 1<<62); return fixCRC(b) }))
	f.Add(edit(good[:headerSize+trailerSize], func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], 0); return fixCRC(b) }))
	dir := f.TempDir()
	name := filepath.Join(dir, "server-0")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ok32 := fuzzRead[float32](t, name, data)
		ok64 := fuzzRead[float64](t, name, data)
		if ok32 && ok64 {
			t.Fatal("file read both as float32 and as float64")
		}
	})
}

// fuzzRead runs the checks of FuzzReadServerFile for element type V and
// reports whether the file read.
func fuzzRead[V Number](t *testing.T, name string, data []byte) bool {
	ctx := t.Context()
	var (
		results [2][]record[V]
		headers [2]Header
		errs    [2]error
	)
	for i, m := range readModes {
		headers[i], errs[i] = readServerFile(ctx, dfs.Local{}, name, collect(&results[i]), m.memLimit)
		if errs[i] != nil {
			if !errors.Is(errs[i], ErrCorrupt) {
				t.Fatalf("%s: error %v does not wrap ErrCorrupt", m.name, errs[i])
			}
			if len(results[i]) != 0 {
				t.Fatalf("%s: %d records delivered before the error %v", m.name, len(results[i]), errs[i])
			}
		}
	}
	if (errs[0] == nil) != (errs[1] == nil) {
		t.Fatalf("read modes disagree: %v / %v", errs[0], errs[1])
	}
	h, herr := ReadHeader(ctx, dfs.Local{}, name)
	if herr != nil && !errors.Is(herr, ErrCorrupt) {
		t.Fatalf("ReadHeader: error %v does not wrap ErrCorrupt", herr)
	}
	if errs[0] != nil {
		return false
	}
	if herr != nil || h != headers[0] || headers[1] != headers[0] {
		t.Fatalf("headers disagree: ReadHeader %+v, %v; mem %+v; stream %+v", h, herr, headers[0], headers[1])
	}
	if len(results[0]) != len(results[1]) || int64(len(results[0])) != h.Records {
		t.Fatalf("read %d / %d records, header says %d", len(results[0]), len(results[1]), h.Records)
	}
	for i := range results[0] {
		a, b := results[0][i], results[1][i]
		if a.key != b.key || !sameBits(a.vals, b.vals) || !sameBits(a.state, b.state) {
			t.Fatalf("record %d: read modes disagree: %v / %v", i, a, b)
		}
	}
	out := filepath.Join(filepath.Dir(name), "rewritten")
	fe, err := WriteServerFile(ctx, dfs.Local{}, out, h, seq(results[0]))
	if err != nil {
		t.Fatalf("rewriting the records: %v", err)
	}
	again, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) || fe.Bytes != int64(len(data)) {
		t.Fatalf("rewritten file differs:\n got %x\nwant %x", again, data)
	}
	return true
}

// FuzzReadManifest reads arbitrary bytes as the manifest of checkpoint 1
// and checks that:
//
//   - nothing panics, and a manifest refused is corrupt (ErrCorrupt) or
//     of another format (errors.ErrUnsupported): the file is there and
//     readable;
//   - a manifest read validates, and written back as Commit writes it
//     reads the same.
//
// Its seeds are manifests as Commit writes them: of servers' files, and
// of tables'.
func FuzzReadManifest(f *testing.F) {
	dir := f.TempDir()
	for i, m := range []Manifest{
		{Format: ManifestFormat, N: 1, Epoch: 1, NextEpoch: 1, Servers: 2, Partitioner: "range", MaxKey: math.MaxUint64 - 1,
			Ranges: []Range{{0, 1<<63 - 1}, {1 << 63, math.MaxUint64 - 2}},
			Files: []FileEntry{
				{Name: ServerFileName(0), Bytes: 1, SHA256: strings.Repeat("01", 32)},
				{Name: ServerFileName(1), Bytes: 2, SHA256: strings.Repeat("23", 32)},
			},
			Created: time.Date(2026, 11, 21, 10, 0, 1, 0, time.UTC), Job: "application_1_0001", Extra: map[string]string{"updater": "adagrad"}},
		{Format: ManifestFormat, N: 1, Epoch: 1, NextEpoch: 2, Servers: 2, Partitioner: "hash", Files: []FileEntry{
			{Name: TableFileName("w", 0), Bytes: 1, SHA256: strings.Repeat("ab", 32)},
			{Name: TableFileName("w", 1), Bytes: 2, SHA256: strings.Repeat("cd", 32)},
			{Name: "tables.json", Bytes: 3, SHA256: strings.Repeat("ef", 32)},
		}},
	} {
		if err := m.Validate(); err != nil {
			f.Fatalf("seed %d: %v", i, err)
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(b, '\n'))
	}
	name := filepath.Join(Path(dir, 1), ManifestName)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := readManifest(t.Context(), dfs.Local{}, dir, 1)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("manifest refused with %v, want ErrCorrupt or ErrUnsupported", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("a manifest read does not validate: %v", err)
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := readManifest(t.Context(), dfs.Local{}, dir, 1)
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("manifest %+v written back read as %+v (%v)", m, again, err)
		}
	})
}
