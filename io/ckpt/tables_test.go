package ckpt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
)

// snap is a Table of rows in key order.
type snap struct {
	name, elem string
	width, sw  int
	keys       []uint64
	vals       [][]float64
	state      [][]float64
}

func (s *snap) Name() string    { return s.name }
func (s *snap) Elem() string    { return s.elem }
func (s *snap) Width() int      { return s.width }
func (s *snap) StateWidth() int { return s.sw }
func (s *snap) Len() int        { return len(s.keys) }
func (s *snap) Range(yield func(uint64, []float64, []float64) bool) {
	for i, k := range s.keys {
		if !yield(k, s.vals[i], s.state[i]) {
			return
		}
	}
}

// TestTableStoreRoundTrip writes two tables of two servers (a float32
// and a float64 one) and the tables' description into checkpoint 3,
// commits it, and reads every file back: the values come back exactly,
// float32 ones widened, and Latest verifies the checkpoint.
func TestTableStoreRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	r := dfs.NewResolver(conf.HadoopConf{}, "")
	s := NewTableStore(r, dir)
	f32 := func(x float64) float64 { return float64(float32(x)) }
	tables := func(rank int) []*snap {
		k := uint64(rank * 100)
		return []*snap{
			{name: "w", elem: "float32", width: 1, sw: 2, keys: []uint64{k + 1, k + 2},
				vals: [][]float64{{f32(0.1)}, {-3}}, state: [][]float64{{f32(0.2), 5}, {0, 1}}},
			{name: "v", elem: "float64", width: 2, sw: 0, keys: []uint64{k + 7},
				vals: [][]float64{{1.0 / 3, math.Inf(-1)}}, state: [][]float64{nil}},
		}
	}
	m := Manifest{Format: ManifestFormat, N: 3, Epoch: 3, NextEpoch: 3, Servers: 2, Partitioner: "hash", Created: time.Now()}
	for rank := 0; rank < 2; rank++ {
		for _, tb := range tables(rank) {
			e, err := s.WriteTable(ctx, 3, rank, tb)
			if err != nil {
				t.Fatal(err)
			}
			m.Files = append(m.Files, FileEntry(e))
		}
	}
	e, err := s.WriteFile(ctx, 3, "tables.json", []byte(`{"tables":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	m.Files = append(m.Files, FileEntry(e))
	if err := Commit(ctx, dfs.Local{}, dir, m); err != nil {
		t.Fatal(err)
	}
	if got, err := Latest(ctx, dfs.Local{}, dir, true); err != nil || got.N != 3 {
		t.Fatalf("latest: %v %v", got.N, err)
	}
	// A committed checkpoint's files are not written again: a job could
	// resume from them.
	if _, err := s.WriteTable(ctx, 3, 0, tables(0)[0]); !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "checkpoint 3 is committed already") {
		t.Errorf("a table written into committed checkpoint 3: %v", err)
	}
	if _, err := s.WriteFile(ctx, 3, "tables.json", []byte(`{}`)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a file written into committed checkpoint 3: %v", err)
	}
	if _, err := Latest(ctx, dfs.Local{}, dir, true); err != nil {
		t.Fatalf("checkpoint 3 after the refused writes: %v", err)
	}
	from := "file://" + Path(dir, 3)
	for rank := 0; rank < 2; rank++ {
		for _, tb := range tables(rank) {
			var got strings.Builder
			w, sw, err := s.ReadTable(ctx, from, rank, tb.name, func(key uint64, vals, state []float64) error {
				fmt.Fprintf(&got, "%d %v %v;", key, vals, state)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for i, k := range tb.keys {
				st := tb.state[i]
				if st == nil {
					st = []float64{}
				}
				fmt.Fprintf(&want, "%d %v %v;", k, tb.vals[i], st)
			}
			if w != tb.width || sw != tb.sw || got.String() != want.String() {
				t.Errorf("table %s server %d: read %d %d %q, want %d %d %q", tb.name, rank, w, sw, got.String(), tb.width, tb.sw, want.String())
			}
		}
	}
	data, err := s.ReadFile(ctx, from, "tables.json", 100)
	if err != nil || string(data) != `{"tables":[]}` {
		t.Errorf("tables.json: %q %v", data, err)
	}
	if _, err := s.ReadFile(ctx, from, "tables.json", 5); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a file over its limit: %v", err)
	}
	if _, err := s.ReadFile(ctx, from, "nothing", 5); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestManifestNeedsEveryTableOfEveryServer: a manifest listing a table's
// file for server 0 only is invalid, naming the missing file.
func TestManifestNeedsEveryTableOfEveryServer(t *testing.T) {
	t.Parallel()
	sum := strings.Repeat("ab", 32)
	m := Manifest{Format: ManifestFormat, N: 1, Servers: 2, Files: []FileEntry{
		{Name: "w.server-0", SHA256: sum}, {Name: "w.server-1", SHA256: sum},
		{Name: "v.server-0", SHA256: sum}, {Name: "tables.json", SHA256: sum},
	}}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "file v.server-1 of server 1 not listed") {
		t.Errorf("validate: %v", err)
	}
	m.Files = append(m.Files, FileEntry{Name: "v.server-1", SHA256: sum})
	if err := m.Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}

func TestParseTableFileName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, table string
		rank        int
		ok          bool
	}{
		{"server-3", "", 3, true},
		{"w.server-0", "w", 0, true},
		{"emb-2.server-12", "emb-2", 12, true},
		{".server-1", "", 0, false},
		{"w.server-01", "", 0, false},
		{"w.server-x", "", 0, false},
		{"tables.json", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, rank, ok := ParseTableFileName(tt.name)
			if table != tt.table || rank != tt.rank || ok != tt.ok {
				t.Errorf("ParseTableFileName(%q) = %q, %d, %v", tt.name, table, rank, ok)
			}
			if ok && TableFileName(table, rank) != tt.name {
				t.Errorf("TableFileName(%q, %d) = %q", table, rank, TableFileName(table, rank))
			}
		})
	}
}

func TestTableStoreWithoutDir(t *testing.T) {
	t.Parallel()
	s := NewTableStore(dfs.NewResolver(conf.HadoopConf{}, ""), "")
	_, err := s.WriteTable(context.Background(), 1, 0, &snap{name: "w", elem: "float32", width: 1})
	if err == nil || !strings.Contains(err.Error(), "no checkpoint directory") {
		t.Errorf("write without a checkpoint directory: %v", err)
	}
}
