package dfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Local is the local file system, through package os. Names are OS paths;
// relative names are relative to the working directory.
//
// Rename is os.Rename: on POSIX systems it atomically replaces an existing
// file (readers see the old or the new file, never a mix), and it fails
// when newname is a non-empty directory. Create's Writer syncs the file to
// disk in Close.
//
// Local is safe for concurrent use; its zero value is ready to use.
type Local struct{}

var _ FileSystem = Local{}

// URI returns "file://" and the absolute form of name.
func (Local) URI(name string) string {
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	return URI{Scheme: "file", Path: name}.String()
}

func (l Local) err(op, name string, err error) error {
	return pathError(op, l.URI(name), innerError(err))
}

func (l Local) ctxErr(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return l.err(op, name, err)
	}
	return nil
}

// Open implements FileSystem.
func (l Local) Open(ctx context.Context, name string) (File, error) {
	if err := l.ctxErr(ctx, "open", name); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, l.err("open", name, err)
	}
	return &localFile{f: f, ctx: ctx, name: name}, nil
}

// Create implements FileSystem. Overwrite truncates an existing file in
// place; BlockSize and Replication are ignored.
func (l Local) Create(ctx context.Context, name string, opts CreateOptions) (Writer, error) {
	if err := l.ctxErr(ctx, "create", name); err != nil {
		return nil, err
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if opts.Overwrite {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		return nil, l.err("create", name, err)
	}
	return &localWriter{f: f, ctx: ctx, name: name}, nil
}

// Stat implements FileSystem.
func (l Local) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if err := l.ctxErr(ctx, "stat", name); err != nil {
		return nil, err
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, l.err("stat", name, err)
	}
	return localInfo{fi}, nil
}

// ReadDir implements FileSystem. An entry removed while the directory is
// being listed is left out.
func (l Local) ReadDir(ctx context.Context, name string) ([]fs.FileInfo, error) {
	if err := l.ctxErr(ctx, "readdir", name); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, l.err("readdir", name, err)
	}
	infos := make([]fs.FileInfo, 0, len(ents))
	for _, e := range ents {
		if err := l.ctxErr(ctx, "readdir", name); err != nil {
			return nil, err
		}
		// Follow symbolic links, as Stat does.
		fi, err := os.Stat(filepath.Join(name, e.Name()))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, l.err("readdir", filepath.Join(name, e.Name()), err)
		}
		infos = append(infos, localInfo{fi})
	}
	return infos, nil
}

// MkdirAll implements FileSystem.
func (l Local) MkdirAll(ctx context.Context, name string, perm fs.FileMode) error {
	if err := l.ctxErr(ctx, "mkdir", name); err != nil {
		return err
	}
	if err := os.MkdirAll(name, perm); err != nil {
		return l.err("mkdir", name, err)
	}
	return nil
}

// Rename implements FileSystem with os.Rename (see Local).
func (l Local) Rename(ctx context.Context, oldname, newname string) error {
	if err := l.ctxErr(ctx, "rename", oldname); err != nil {
		return err
	}
	if err := os.Rename(oldname, newname); err != nil {
		return pathError("rename", l.URI(oldname)+" -> "+l.URI(newname), innerError(err))
	}
	return nil
}

// Remove implements FileSystem.
func (l Local) Remove(ctx context.Context, name string) error {
	if err := l.ctxErr(ctx, "remove", name); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return l.err("remove", name, err)
	}
	return nil
}

// RemoveAll implements FileSystem. It refuses to remove the root.
func (l Local) RemoveAll(ctx context.Context, name string) error {
	if err := l.ctxErr(ctx, "removeall", name); err != nil {
		return err
	}
	if abs, err := filepath.Abs(name); err == nil && abs == filepath.Dir(abs) {
		return l.err("removeall", name, fmt.Errorf("refusing to remove the root: %w", fs.ErrInvalid))
	}
	if err := os.RemoveAll(name); err != nil {
		return l.err("removeall", name, err)
	}
	return nil
}

// Glob implements FileSystem.
func (l Local) Glob(ctx context.Context, pattern string) ([]string, error) {
	return glob(ctx, l, pattern, string(filepath.Separator))
}

// localInfo adds BlockSize to an os FileInfo.
type localInfo struct{ fs.FileInfo }

func (fi localInfo) BlockSize() int64 {
	if fi.IsDir() {
		return 0
	}
	return LocalBlockSize
}

type localFile struct {
	f    *os.File
	ctx  context.Context
	name string
}

func (f *localFile) check(op string) error {
	if err := f.ctx.Err(); err != nil {
		return Local{}.err(op, f.name, err)
	}
	return nil
}

func (f *localFile) Read(b []byte) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	n, err := f.f.Read(b)
	if err != nil && n == 0 && !isEOF(err) {
		return n, Local{}.err("read", f.name, err)
	}
	return n, err
}

func (f *localFile) ReadAt(b []byte, off int64) (int, error) {
	if err := f.check("read"); err != nil {
		return 0, err
	}
	n, err := f.f.ReadAt(b, off)
	if err != nil && !isEOF(err) {
		return n, Local{}.err("read", f.name, err)
	}
	return n, err
}

func (f *localFile) Seek(off int64, whence int) (int64, error) {
	if err := f.check("seek"); err != nil {
		return 0, err
	}
	n, err := f.f.Seek(off, whence)
	if err != nil {
		return n, Local{}.err("seek", f.name, err)
	}
	return n, nil
}

func (f *localFile) Close() error {
	if err := f.f.Close(); err != nil {
		return Local{}.err("close", f.name, err)
	}
	return nil
}

func (f *localFile) Stat() (fs.FileInfo, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return nil, Local{}.err("stat", f.name, err)
	}
	return localInfo{fi}, nil
}

type localWriter struct {
	f      *os.File
	ctx    context.Context
	name   string
	closed bool
}

func (w *localWriter) Write(b []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, Local{}.err("write", w.name, err)
	}
	n, err := w.f.Write(b)
	if err != nil {
		return n, Local{}.err("write", w.name, err)
	}
	return n, nil
}

// Close syncs the file to stable storage, then closes it.
func (w *localWriter) Close() error {
	if w.closed {
		return Local{}.err("close", w.name, ErrClosed)
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		w.f.Close()
		return Local{}.err("close", w.name, err)
	}
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return Local{}.err("sync", w.name, err)
	}
	if err := w.f.Close(); err != nil {
		return Local{}.err("close", w.name, err)
	}
	return nil
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
