package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
)

// Table is one server's records of one table, as a parameter-server
// runtime hands them to TableWriter.WriteModel: the same type as
// ckpt.Table and psnode.TableSnapshot (see ckpt.Table), so that
// TableWriter implements psnode.ModelWriter without this package
// importing psnode.
type Table = ckpt.Table

// The part formats a TableWriter writes, by the names users give them
// (ps-lr's --model-format).
const (
	PartText   = "text"
	PartBinary = "binary"
)

// TableWriter writes the servers' parts of a model of named tables into
// an output directory: psnode.ModelWriter. One table goes directly into
// the directory, several each into a directory named after the table;
// server 0 also writes TablesFile, which Commit lists in the manifest.
// Its methods are safe for concurrent use.
type TableWriter struct {
	r      Resolver
	output string
	format string // Format or FormatBinary
}

// NewTableWriter returns the writer of a model into output (a path or
// URI) with parts in format: PartText ("" too) or PartBinary.
func NewTableWriter(r Resolver, output, format string) (*TableWriter, error) {
	if output == "" {
		return nil, fmt.Errorf("model: no output directory")
	}
	w := &TableWriter{r: r, output: output}
	switch format {
	case PartText, "":
		w.format = Format
	case PartBinary:
		w.format = FormatBinary
	default:
		return nil, fmt.Errorf("model: part format %q, want %s or %s", format, PartText, PartBinary)
	}
	return w, nil
}

// WriteModel writes server rank's part of every table, each all or
// nothing (dfs.WriteAtomic), and on rank 0 then TablesFile.
func (w *TableWriter) WriteModel(ctx context.Context, rank int, tables []Table) error {
	if len(tables) == 0 {
		return nil
	}
	fsys, base, err := w.r.Resolve(ctx, w.output)
	if err != nil {
		return fmt.Errorf("model: %s: %w", w.output, err)
	}
	base = strings.TrimSuffix(base, "/")
	doc := tablesDoc{Format: tablesFormat}
	for _, t := range tables {
		mt := ManifestTable{Name: t.Name(), Width: t.Width(), Elem: t.Elem(), Format: w.format}
		if len(tables) > 1 {
			mt.Dir = t.Name()
		}
		doc.Tables = append(doc.Tables, mt)
	}
	if err := checkTables(doc.Tables); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	for i, t := range tables {
		dir := base
		if d := doc.Tables[i].Dir; d != "" {
			dir = path.Join(base, d)
		}
		if err := fsys.MkdirAll(ctx, dir, 0o755); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		name := path.Join(dir, PartName(rank))
		err := dfs.WriteAtomic(ctx, fsys, name, func(out io.Writer) error {
			if w.format == FormatBinary {
				return encodeBinary(out, t)
			}
			return encodeText(out, t)
		})
		if err != nil {
			return fmt.Errorf("model: write %s: %w", fsys.URI(name), err)
		}
	}
	if rank != 0 {
		return nil
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	name := path.Join(base, TablesFile)
	if err := dfs.WriteFile(ctx, fsys, name, append(data, '\n')); err != nil {
		return fmt.Errorf("model: write %s: %w", fsys.URI(name), err)
	}
	return nil
}
