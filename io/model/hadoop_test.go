package model

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
)

// TestHadoopModelTables writes a model of two tables into HDFS, in text
// and in binary parts, commits it and reads it back; Hadoop's own
// hdfs dfs -text shows a text part's lines as the Go reader reads them.
func TestHadoopModelTables(t *testing.T) {
	c := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	servers := func() [][]Table {
		return [][]Table{
			{
				&memTable{name: "w", elem: "float32", width: 1, keys: []uint64{1, 2}, vals: [][]float64{{float64(float32(0.1))}, {3}}},
				&memTable{name: "v", elem: "float32", width: 3, keys: []uint64{2, 5}, vals: [][]float64{{0.5, -2, 0}, {0, 0, 0}}},
			},
			{
				&memTable{name: "w", elem: "float32", width: 1, keys: []uint64{7}, vals: [][]float64{{-2.5}}},
				&memTable{name: "v", elem: "float32", width: 3, keys: []uint64{8}, vals: [][]float64{{1, -1, 0.25}}},
			},
		}
	}
	base := c.TempDir(t)
	var read []string
	for _, format := range []string{PartText, PartBinary} {
		dir := "hdfs://" + base + "/" + format
		w, err := NewTableWriter(c.Resolver, dir, format)
		if err != nil {
			t.Fatal(err)
		}
		for rank, tables := range servers() {
			if err := w.WriteModel(ctx, rank, tables); err != nil {
				t.Fatal(err)
			}
		}
		if err := Commit(ctx, ResolverFS{R: c.Resolver}, dir, 2, Manifest{Job: "hdfs"}); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, table := range []string{"w", "v"} {
			err := ReadTable(ctx, c.Resolver, dir, table, func(key uint64, vals []float32) error {
				fmt.Fprintf(&b, "%s %d %v;", table, key, vals)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		read = append(read, b.String())
		if format == PartText {
			out, ok := hadooptest.HadoopShell(t, "-text", base+"/text/v/part-00000", base+"/text/v/part-00001")
			if ok && string(out) != "2\t0.5 -2 0\n8\t1 -1 0.25\n" {
				t.Errorf("hdfs dfs -text shows %q", out)
			}
		}
	}
	want := "w 1 [0.1];w 2 [3];w 7 [-2.5];v 2 [0.5 -2 0];v 8 [1 -1 0.25];"
	for i, r := range read {
		if r != want {
			t.Errorf("format %d read %q, want %q", i, r, want)
		}
	}
}
