package dfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"
)

// cleanupTimeout bounds the removal of a temporary file after a failed
// WriteAtomic, which runs even when the write's context is done.
const cleanupTimeout = 30 * time.Second

// TempName returns the temporary name WriteAtomic writes name under:
// ".<base>.tmp" in the same directory. Spindle's readers skip names
// starting with ".".
func TempName(name string) string {
	dir, base := path.Split(name)
	return dir + "." + base + ".tmp"
}

// WriteAtomic writes the file name so that readers see all of it or
// none: fill writes the contents to a temporary file (TempName, in the
// same directory, replacing a stale one), which is closed and then renamed
// over name. The parent directory must exist.
//
// On any failure — fill's error, a failed Write, Close or Rename, or a
// panic in fill — the temporary file is removed, even when ctx is done
// (with a context of its own, bounded to 30 s), and name is left as it
// was; a failure to remove it is added to the returned error. A fill that
// must give up part-way returns an error (or cancels ctx).
//
// How atomic the rename is depends on the file system: a rename on the
// same local file system is; on HDFS a rename over an existing file is
// two NameNode operations, so a concurrent reader may briefly find no
// file, but never a partial one.
func WriteAtomic(ctx context.Context, fsys FileSystem, name string, fill func(w io.Writer) error) (err error) {
	tmp := TempName(name)
	w, err := fsys.Create(ctx, tmp, CreateOptions{Overwrite: true})
	if err != nil {
		return err
	}
	closed, renamed := false, false
	defer func() {
		if renamed {
			return
		}
		if !closed {
			_ = w.Close()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if rerr := fsys.Remove(cctx, tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err != nil {
			err = fmt.Errorf("%w (and removing the temporary file: %w)", err, rerr)
		}
	}()
	if err := fill(w); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	closed = true
	if err := w.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(ctx, tmp, name); err != nil {
		return err
	}
	renamed = true
	return nil
}

// WriteFile writes data to name with WriteAtomic.
func WriteFile(ctx context.Context, fsys FileSystem, name string, data []byte) error {
	return WriteAtomic(ctx, fsys, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// RemoveEmptyDir removes the directory name if it is empty and reports
// whether it did; a directory with anything in it is left alone, and
// not an error, as is one that no longer exists. Remove takes only an
// empty directory, should an entry appear between the look and the
// removal.
func RemoveEmptyDir(ctx context.Context, fsys FileSystem, name string) (bool, error) {
	entries, err := fsys.ReadDir(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case len(entries) > 0:
		return false, nil
	}
	if err := fsys.Remove(ctx, name); err != nil {
		return false, err
	}
	return true, nil
}
