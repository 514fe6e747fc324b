package split_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// memFS is a read-only, in-memory dfs.FileSystem of one directory level,
// so that fuzzing does not touch the disk. It is its own Resolver: every
// URI "mem:///name" names files[name].
type memFS struct {
	files map[string][]byte
	// failAt makes reading a file fail past that many bytes, as a disk
	// or a connection that fails would.
	failAt map[string]int64
	// size, when it has the file, is the size its Stat says, which may
	// be more than it has: its reads then end early.
	size map[string]int64
}

func (m memFS) Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error) {
	const prefix = "mem://"
	if len(uri) < len(prefix) || uri[:len(prefix)] != prefix {
		return nil, "", errors.New("memfs: not a mem:// URI")
	}
	return m, uri[len(prefix):], nil
}

func (m memFS) URI(name string) string { return "mem://" + name }

type memInfo struct {
	name string
	size int64
}

func (fi memInfo) Name() string       { return fi.name }
func (fi memInfo) Size() int64        { return fi.size }
func (fi memInfo) Mode() fs.FileMode  { return 0o644 }
func (fi memInfo) ModTime() time.Time { return time.Time{} }
func (fi memInfo) IsDir() bool        { return false }
func (fi memInfo) Sys() any           { return nil }

type memFile struct {
	*bytes.Reader
	info memInfo
}

func (f memFile) Close() error               { return nil }
func (f memFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (m memFS) Open(ctx context.Context, name string) (dfs.File, error) {
	b, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f := memFile{bytes.NewReader(b), memInfo{name, m.sizeOf(name, b)}}
	if at, ok := m.failAt[name]; ok {
		return failingFile{f, at}, nil
	}
	return f, nil
}

// errFailedRead is the error of a failingFile.
var errFailedRead = errors.New("memfs: read failed")

// failingFile is a memFile whose reads fail past at bytes.
type failingFile struct {
	memFile
	at int64
}

func (f failingFile) Read(p []byte) (int, error) {
	pos, _ := f.Seek(0, io.SeekCurrent)
	if pos >= f.at {
		return 0, errFailedRead
	}
	return f.memFile.Read(p[:min(int64(len(p)), f.at-pos)])
}

func (m memFS) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	b, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name, m.sizeOf(name, b)}, nil
}

// sizeOf is the size file name, holding b, says it has.
func (m memFS) sizeOf(name string, b []byte) int64 {
	if n, ok := m.size[name]; ok {
		return n
	}
	return int64(len(b))
}

var errReadOnly = errors.New("memfs: read-only")

func (m memFS) Create(context.Context, string, dfs.CreateOptions) (dfs.Writer, error) {
	return nil, errReadOnly
}
func (m memFS) ReadDir(context.Context, string) ([]fs.FileInfo, error) { return nil, errReadOnly }
func (m memFS) MkdirAll(context.Context, string, fs.FileMode) error    { return errReadOnly }
func (m memFS) Rename(context.Context, string, string) error           { return errReadOnly }
func (m memFS) Remove(context.Context, string) error                   { return errReadOnly }
func (m memFS) RemoveAll(context.Context, string) error                { return errReadOnly }
func (m memFS) Glob(context.Context, string) ([]string, error)         { return nil, errReadOnly }
