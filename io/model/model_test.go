package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
)

func TestCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(dir, PartName(0)), []byte("1\t0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Commit(ctx, LocalFS{}, dir, 2, Manifest{Job: "j"})
	if err == nil || !strings.Contains(err.Error(), PartName(1)) {
		t.Fatalf("commit with part 1 missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SuccessFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("_SUCCESS written for an incomplete model")
	}
	if err := os.WriteFile(filepath.Join(dir, PartName(1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Commit(ctx, LocalFS{}, dir, 2, Manifest{Job: "j"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{SuccessFile, ManifestFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// memTable is a Table of rows in key order.
type memTable struct {
	name, elem string
	width      int
	keys       []uint64
	vals       [][]float64
}

func (m *memTable) Name() string    { return m.name }
func (m *memTable) Elem() string    { return m.elem }
func (m *memTable) Width() int      { return m.width }
func (m *memTable) StateWidth() int { return 0 }
func (m *memTable) Len() int        { return len(m.keys) }
func (m *memTable) Range(yield func(uint64, []float64, []float64) bool) {
	for i, k := range m.keys {
		if !yield(k, m.vals[i], nil) {
			return
		}
	}
}

func resolver() Resolver { return dfs.NewResolver(conf.HadoopConf{}, "") }

// writeModel writes tables as a 2-server model in format and commits it.
func writeModel(t *testing.T, format string, servers [][]Table) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "model")
	w, err := NewTableWriter(resolver(), dir, format)
	if err != nil {
		t.Fatal(err)
	}
	for rank, tables := range servers {
		if err := w.WriteModel(ctx, rank, tables); err != nil {
			t.Fatal(err)
		}
	}
	if err := Commit(ctx, ResolverFS{R: resolver()}, dir, len(servers), Manifest{Job: "test"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readAll[V Number](t *testing.T, dir, table string) string {
	t.Helper()
	var b strings.Builder
	err := ReadTable(context.Background(), resolver(), dir, table, func(key uint64, vals []V) error {
		fmt.Fprintf(&b, "%d:%v ", key, vals)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestOneTableTextIsTheFlatLayout: a model of one float32 table of width
// 1 in text keeps the layout and bytes of models before tables: lines
// "key<TAB>weight" in part-NNNNN, zeros left out, manifest format
// spindle-text/v1 with its parts listed.
func TestOneTableTextIsTheFlatLayout(t *testing.T) {
	t.Parallel()
	w0 := &memTable{name: "w", elem: "float32", width: 1, keys: []uint64{0, 4, 9}, vals: [][]float64{{0.5}, {0}, {float64(float32(-1.1))}}}
	w1 := &memTable{name: "w", elem: "float32", width: 1, keys: []uint64{3}, vals: [][]float64{{2}}}
	dir := writeModel(t, PartText, [][]Table{{w0}, {w1}})
	got, err := os.ReadFile(filepath.Join(dir, PartName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "0\t0.5\n9\t-1.1\n" {
		t.Errorf("part 0 holds %q", got)
	}
	m, err := ReadManifest(context.Background(), resolver(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != Format || len(m.Parts) != 2 || len(m.Tables) != 1 || m.Tables[0].Name != "w" || m.Tables[0].Dir != "" {
		t.Errorf("manifest %+v", m)
	}
	if got := readAll[float32](t, dir, ""); got != "0:[0.5] 9:[-1.1] 3:[2] " {
		t.Errorf("read %q", got)
	}
}

// TestTablesModelBothFormats writes a model of two tables (a float32
// weight and a float64 3-wide embedding) in text and in binary; both read
// back to the same values, exactly, from their own directories.
func TestTablesModelBothFormats(t *testing.T) {
	t.Parallel()
	servers := func() [][]Table {
		return [][]Table{
			{
				&memTable{name: "w", elem: "float32", width: 1, keys: []uint64{1, 2}, vals: [][]float64{{float64(float32(0.1))}, {3}}},
				&memTable{name: "v", elem: "float64", width: 3, keys: []uint64{2, 5}, vals: [][]float64{{0.1, 0.2, 1e-300}, {0, 0, 0}}},
			},
			{
				&memTable{name: "w", elem: "float32", width: 1, keys: []uint64{7}, vals: [][]float64{{-2.5}}},
				&memTable{name: "v", elem: "float64", width: 3, keys: []uint64{8}, vals: [][]float64{{1, -1, 1.0 / 3}}},
			},
		}
	}
	var results []string
	for _, format := range []string{PartText, PartBinary} {
		dir := writeModel(t, format, servers())
		for _, sub := range []string{"w", "v"} {
			if _, err := os.Stat(filepath.Join(dir, sub, PartName(1))); err != nil {
				t.Errorf("%s: %v", format, err)
			}
		}
		m, err := ReadManifest(context.Background(), resolver(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.Format != FormatTables || fmt.Sprint(m.TableNames()) != "[w v]" || m.Tables[1].Width != 3 || len(m.Tables[1].Parts) != 2 {
			t.Errorf("%s: manifest %+v", format, m)
		}
		results = append(results, readAll[float32](t, dir, "w")+"| "+readAll[float64](t, dir, "v"))
		if err := Read(context.Background(), resolver(), dir, func(uint64, []float32) error { return nil }); err == nil || !strings.Contains(err.Error(), "2 tables (w, v): name one") {
			t.Errorf("%s: Read of a model of two tables: %v", format, err)
		}
	}
	want := "1:[0.1] 2:[3] 7:[-2.5] | 2:[0.1 0.2 1e-300] 8:[1 -1 0.3333333333333333] "
	for i, r := range results {
		if r != want {
			t.Errorf("format %d read %q, want %q", i, r, want)
		}
	}
}

func TestCommitTablesMissingPart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "model")
	w, _ := NewTableWriter(resolver(), dir, PartBinary)
	tables := []Table{&memTable{name: "a", elem: "float32", width: 1}, &memTable{name: "b", elem: "float32", width: 2}}
	if err := w.WriteModel(ctx, 0, tables); err != nil {
		t.Fatal(err)
	}
	err := Commit(ctx, LocalFS{}, dir, 2, Manifest{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("a", PartName(1))) || !strings.Contains(err.Error(), filepath.Join("b", PartName(1))) {
		t.Errorf("commit without server 1's parts: %v", err)
	}
}

func TestNewTableWriterRejectsFormat(t *testing.T) {
	t.Parallel()
	if _, err := NewTableWriter(resolver(), t.TempDir(), "parquet"); err == nil || !strings.Contains(err.Error(), `"parquet"`) {
		t.Errorf("format parquet: %v", err)
	}
}

// TestDecodePartErrors: malformed parts are errors naming the file and
// the line or what is wrong.
func TestDecodePartErrors(t *testing.T) {
	t.Parallel()
	bin := func(width int, recs int, mutate func([]byte)) []byte {
		var b bytes.Buffer
		m := &memTable{name: "x", elem: "float32", width: width}
		for i := 0; i < recs; i++ {
			m.keys = append(m.keys, uint64(i+1))
			m.vals = append(m.vals, slices.Repeat([]float64{1}, width))
		}
		if err := encodeBinary(&b, m); err != nil {
			t.Fatal(err)
		}
		out := b.Bytes()
		if mutate != nil {
			mutate(out)
		}
		return out
	}
	tests := []struct {
		name  string
		data  []byte
		width int
		want  string
	}{
		{"no tab", []byte("1 0.5\n"), 0, "p line 1: want key<TAB>values"},
		{"bad key", []byte("x\t0.5\n"), 0, `line 1: key "x"`},
		{"bad value", []byte("1\t0.5\n2\tzz\n"), 0, `line 2: value "zz"`},
		{"trailing space", []byte("1\t0.5 \n"), 0, `line 1: value ""`},
		{"width", []byte("1\t0.5 1\n"), 1, "line 1: 2 values, the table has 1"},
		{"binary crc", bin(2, 3, func(b []byte) { b[20] ^= 1 }), 2, "crc mismatch"},
		{"binary truncated", bin(2, 3, nil)[:40], 2, "not a whole number"},
		{"binary width", bin(2, 1, nil), 3, "width 2, the table has 3"},
		{"binary huge width", bin(1, 1, func(b []byte) { b[14] = 0xff }), 0, "width 16711681"},
		{"binary elem", bin(1, 1, func(b []byte) { b[8] = 9 }), 0, "element type 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := decodePart(bytes.NewReader(tt.data), partSpec{uri: "p", size: int64(len(tt.data)), width: tt.width, elem: "float32"},
				func(uint64, []float32) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestCommitTablesWithoutServers: a collective job's workers write the
// parts of its tables; Commit lists the parts numbered from 0 and refuses
// a table without part-00000.
func TestCommitTablesWithoutServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "model")
	w, _ := NewTableWriter(resolver(), dir, PartText)
	tables := []Table{
		&memTable{name: "a", elem: "float64", width: 1, keys: []uint64{0}, vals: [][]float64{{1}}},
		&memTable{name: "b", elem: "float64", width: 2, keys: []uint64{3}, vals: [][]float64{{1, 2}}},
	}
	if err := w.WriteModel(ctx, 0, tables); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "b", PartName(0))); err != nil {
		t.Fatal(err)
	}
	err := Commit(ctx, LocalFS{}, dir, 0, Manifest{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("b", PartName(0))) {
		t.Fatalf("commit without table b's part-00000: %v", err)
	}
	if err := w.WriteModel(ctx, 0, tables); err != nil {
		t.Fatal(err)
	}
	if err := Commit(ctx, LocalFS{}, dir, 0, Manifest{}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(ctx, resolver(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range m.Tables {
		if len(mt.Parts) != 1 || mt.Parts[0].Name != PartName(0) {
			t.Errorf("table %s: parts %+v, want part-00000 alone", mt.Name, mt.Parts)
		}
	}
	if got := readAll[float64](t, dir, "b"); got != "3:[1 2] " {
		t.Errorf("table b reads %q", got)
	}
}
