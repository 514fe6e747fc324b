package model

import (
	"context"
	"fmt"
	"strings"

	"github.com/spindle-ps/spindle/io/dfs"
)

// Read reads the only table of the complete model in dir (a path or URI)
// as float32 values: ReadTable with no table name.
func Read(ctx context.Context, r Resolver, dir string, fn func(key uint64, vals []float32) error) error {
	return ReadTable(ctx, r, dir, "", fn)
}

// ReadTable reads table of the complete model in dir (a path or URI; ""
// names the model's only table), calling fn for every key with its
// values, part by part in rank order and, within a part, in ascending key
// order. Keys whose values are all zero may be absent. Text and binary
// parts are read alike (the manifest names their format, and the parts'
// first bytes must agree). Values convert to V; a float64 table read as
// float32 rounds.
//
// ReadTable refuses a directory without _SUCCESS (ErrIncomplete) and
// names the file, and the line or record, of anything malformed. vals is
// reused between calls.
func ReadTable[V Number](ctx context.Context, r Resolver, dir, table string, fn func(key uint64, vals []V) error) error {
	fsys, name, err := r.Resolve(ctx, dir)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(name, "/")
	m, err := completeManifest(ctx, fsys, base, dir)
	if err != nil {
		return err
	}
	t, err := m.table(table)
	if err != nil {
		return fmt.Errorf("%w in %s", err, dir)
	}
	tdir := base
	if t.Dir != "" {
		tdir = base + "/" + t.Dir
	}
	for _, p := range t.Parts {
		if err := readPart(ctx, fsys, tdir+"/"+p.Name, t, fn); err != nil {
			return err
		}
	}
	return nil
}

// readPart reads one part of table t.
func readPart[V Number](ctx context.Context, fsys dfs.FileSystem, name string, t ManifestTable, fn func(uint64, []V) error) error {
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return decodePart(f, partSpec{uri: fsys.URI(name), size: fi.Size(), width: t.Width, elem: t.Elem, format: t.Format}, fn)
}
