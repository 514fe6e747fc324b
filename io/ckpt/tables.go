package ckpt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/spindle-ps/spindle/io/dfs"
)

// Table is one server's records of one table, as a parameter-server
// runtime hands them to TableStore.WriteTable. It is the same type as
// psnode.TableSnapshot (both are aliases of one unnamed interface type),
// so that TableStore implements psnode.CheckpointStore without this
// package importing psnode.
type Table = interface {
	// Name returns the table's name.
	Name() string
	// Elem returns the element type of the table's values: "float32" or
	// "float64".
	Elem() string
	// Width returns the number of values per key.
	Width() int
	// StateWidth returns the updater's number of state values per value.
	StateWidth() int
	// Len returns the number of records Range yields.
	Len() int
	// Range yields every record in ascending key order: the key, its
	// Width values and its Width*StateWidth updater state values, widened
	// to float64 (exactly: a float32 table's values convert back without
	// loss). The slices are reused between records. Range stops when
	// yield returns false.
	Range(yield func(key uint64, vals, state []float64) bool)
}

// TableFile is a FileEntry in the shape of psnode.CheckpointFile (the
// same type).
type TableFile = struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// Resolver maps a URI onto a file system; *dfs.Resolver is one.
type Resolver interface {
	Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error)
}

// TableStore writes the files of checkpoints of named tables under a
// checkpoint directory and reads them back: psnode.CheckpointStore. Table
// t's records on server r go to "<dir>/<n>/<t>.server-<r>"
// (TableFileName), in the server-file format, with the element type the
// table declares. Its methods are safe for concurrent use.
type TableStore struct {
	r   Resolver
	dir string
}

// NewTableStore returns the store of the checkpoints under dir (a path or
// URI; "" when the job has no checkpoint directory: then only reads of a
// checkpoint named by its full URI work).
func NewTableStore(r Resolver, dir string) *TableStore { return &TableStore{r: r, dir: dir} }

// elemType returns the ElemType named by a Table's Elem.
func elemType(s string) (ElemType, error) {
	switch s {
	case "float32":
		return Float32, nil
	case "float64":
		return Float64, nil
	}
	return 0, fmt.Errorf("element type %q, want float32 or float64", s)
}

// checkpointDir resolves the directory of checkpoint n, to write in: one
// already committed (its manifest exists) is refused with an error
// wrapping fs.ErrExist, since its files are the ones its manifest lists
// and a job may resume from them.
func (s *TableStore) checkpointDir(ctx context.Context, n int) (dfs.FileSystem, string, error) {
	if s.dir == "" {
		return nil, "", errors.New("ckpt: the job has no checkpoint directory")
	}
	fsys, base, err := s.r.Resolve(ctx, s.dir)
	if err != nil {
		return nil, "", fmt.Errorf("ckpt: %s: %w", s.dir, err)
	}
	cdir := Path(base, n)
	mname := path.Join(cdir, ManifestName)
	switch _, err := fsys.Stat(ctx, mname); {
	case err == nil:
		return nil, "", fmt.Errorf("ckpt: checkpoint %d is committed already (%s): its files are not written again: %w", n, fsys.URI(mname), fs.ErrExist)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("ckpt: checkpoint %d: %w", n, err)
	}
	if err := fsys.MkdirAll(ctx, cdir, 0o755); err != nil {
		return nil, "", fmt.Errorf("ckpt: %w", err)
	}
	return fsys, cdir, nil
}

// WriteTable writes server rank's records of t as the server file
// "<dir>/<n>/<t.Name()>.server-<rank>" and returns its entry.
func (s *TableStore) WriteTable(ctx context.Context, n, rank int, t Table) (TableFile, error) {
	elem, err := elemType(t.Elem())
	if err != nil {
		return TableFile{}, fmt.Errorf("ckpt: table %s: %w", t.Name(), err)
	}
	if !validFileName(t.Name()) || strings.Contains(t.Name(), ".") {
		return TableFile{}, fmt.Errorf("ckpt: table name %q cannot name a file", t.Name())
	}
	fsys, cdir, err := s.checkpointDir(ctx, n)
	if err != nil {
		return TableFile{}, err
	}
	h := Header{Elem: elem, Dim: t.Width(), StateWidth: t.StateWidth(), Records: int64(t.Len())}
	e, err := writeServerFile(ctx, fsys, path.Join(cdir, TableFileName(t.Name(), rank)), h, t.Range)
	if err != nil {
		return TableFile{}, err
	}
	return TableFile(e), nil
}

// WriteFile writes data as the file name of checkpoint n, all or nothing,
// and returns its entry.
func (s *TableStore) WriteFile(ctx context.Context, n int, name string, data []byte) (TableFile, error) {
	if !validFileName(name) {
		return TableFile{}, fmt.Errorf("ckpt: %q cannot name a checkpoint file", name)
	}
	fsys, cdir, err := s.checkpointDir(ctx, n)
	if err != nil {
		return TableFile{}, err
	}
	full := path.Join(cdir, name)
	if err := dfs.WriteFile(ctx, fsys, full, data); err != nil {
		return TableFile{}, fmt.Errorf("ckpt: write %s: %w", fsys.URI(full), err)
	}
	return TableFile{Name: name, Bytes: int64(len(data)), SHA256: sha256Hex(data)}, nil
}

// ReadTable reads server rank's file of table from the checkpoint
// directory from (a path or URI: "<dir>/<n>"), verifying it whole before
// the first call of fn (see ReadServerFile), and returns its width and
// state width. A float32 file's values reach fn widened to float64.
func (s *TableStore) ReadTable(ctx context.Context, from string, rank int, table string, fn func(key uint64, vals, state []float64) error) (width, stateWidth int, err error) {
	fsys, base, err := s.r.Resolve(ctx, from)
	if err != nil {
		return 0, 0, fmt.Errorf("ckpt: %s: %w", from, err)
	}
	h, err := readServerFileAs(ctx, fsys, path.Join(base, TableFileName(table, rank)), fn, memReadLimit, true)
	if err != nil {
		return 0, 0, err
	}
	return h.Dim, h.StateWidth, nil
}

// ReadFile returns the file name of the checkpoint directory from, of at
// most limit bytes (a larger one is an error wrapping ErrCorrupt).
func (s *TableStore) ReadFile(ctx context.Context, from, name string, limit int64) ([]byte, error) {
	fsys, base, err := s.r.Resolve(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("ckpt: %s: %w", from, err)
	}
	full := path.Join(base, name)
	f, err := fsys.Open(ctx, full)
	if err != nil {
		return nil, fmt.Errorf("ckpt: read: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("ckpt: read %s: %w", fsys.URI(full), err)
	}
	if int64(len(data)) > limit {
		return nil, corrupt(fsys.URI(full), -1, "larger than %d bytes", limit)
	}
	return data, nil
}

// sha256Hex returns the lowercase hex SHA-256 of data.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
