package local

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spindle-ps/spindle/job"
)

// Bounds on what unpacking one archive may write.
const (
	// MaxUnpackedBytes bounds the bytes of all files of one archive.
	MaxUnpackedBytes = 8 << 30
	// MaxArchiveEntries bounds the entries of one archive.
	MaxArchiveEntries = 100_000
)

// errUnpackLimit marks an archive past MaxUnpackedBytes or
// MaxArchiveEntries.
var errUnpackLimit = errors.New("local: archive too large")

// unpackArchives unpacks every archive of spec (job.ArchiveName) into a
// new directory of dir, as a NodeManager does for a YARN container. It
// refuses a directory that exists, so that nothing of the user's is
// overwritten, and returns a function that removes what it unpacked.
func unpackArchives(ctx context.Context, archives []string, dir string) (cleanup func() error, err error) {
	var made []string
	cleanup = func() error {
		var errs []error
		for _, d := range made {
			errs = append(errs, os.RemoveAll(d))
		}
		made = nil
		return errors.Join(errs...)
	}
	for _, a := range archives {
		local, name, err := job.ArchiveName(a)
		if err != nil {
			return nil, errors.Join(err, cleanup())
		}
		dst := filepath.Join(dir, name)
		if err := os.Mkdir(dst, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				err = fmt.Errorf("local: --archives %s: %s exists; remove it or unpack into another name (%s#NAME)", local, dst, local)
			}
			return nil, errors.Join(err, cleanup())
		}
		made = append(made, dst)
		if err := UnpackArchive(ctx, local, dst); err != nil {
			return nil, errors.Join(fmt.Errorf("local: --archives %s: %w", local, err), cleanup())
		}
	}
	return cleanup, nil
}

// UnpackArchive unpacks the .tar.gz, .tgz or .zip file src into the
// existing directory dst. Entries must stay inside dst: absolute names,
// names with "..", symbolic links that point outside dst, hard links and
// special files are errors, as are archives of more than
// MaxArchiveEntries entries or MaxUnpackedBytes bytes.
func UnpackArchive(ctx context.Context, src, dst string) error {
	return unpack(ctx, src, &unpacker{dst: dst, maxBytes: MaxUnpackedBytes, maxEntries: MaxArchiveEntries})
}

func unpack(ctx context.Context, src string, u *unpacker) error {
	lower := strings.ToLower(src)
	switch {
	case strings.HasSuffix(lower, ".zip"):
		return unzip(ctx, src, u)
	case strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		return untgz(ctx, src, u)
	}
	return fmt.Errorf("%s: not a .tar.gz, .tgz or .zip file", src)
}

// unpacker writes entries into dst within the bounds.
type unpacker struct {
	dst        string
	maxBytes   int64
	maxEntries int
	entries    int
	bytes      int64
}

// path is where entry name goes in dst.
func (u *unpacker) path(name string) (string, error) {
	u.entries++
	if u.entries > u.maxEntries {
		return "", fmt.Errorf("%w: more than %d entries", errUnpackLimit, u.maxEntries)
	}
	clean := filepath.Clean(filepath.FromSlash(name))
	if name == "" || filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("entry %q: outside the directory it is unpacked into", name)
	}
	return filepath.Join(u.dst, clean), nil
}

func (u *unpacker) dir(p string) error { return os.MkdirAll(p, 0o755) }

func (u *unpacker) file(p string, mode fs.FileMode, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	left := u.maxBytes - u.bytes
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	u.bytes += n
	if err == nil && n > left {
		err = fmt.Errorf("%w: more than %d bytes unpacked", errUnpackLimit, u.maxBytes)
	}
	return errors.Join(err, f.Close())
}

func (u *unpacker) symlink(p, name, target string) error {
	if filepath.IsAbs(target) {
		return fmt.Errorf("entry %q: symbolic link to an absolute path %q", name, target)
	}
	resolved := filepath.Join(filepath.Dir(p), target)
	if rel, err := filepath.Rel(u.dst, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("entry %q: symbolic link %q points outside the directory it is unpacked into", name, target)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.Symlink(target, p)
}

func untgz(ctx context.Context, src string, u *unpacker) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		p, err := u.path(h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = u.dir(p)
		case tar.TypeReg:
			err = u.file(p, fs.FileMode(h.Mode), tr)
		case tar.TypeSymlink:
			err = u.symlink(p, h.Name, h.Linkname)
		case tar.TypeXGlobalHeader:
		default:
			err = fmt.Errorf("entry %q: type %q (hard link or special file) is not unpacked", h.Name, h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func unzip(ctx context.Context, src string, u *unpacker) error {
	zr, err := zip.OpenReader(src)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer zr.Close()
	if len(zr.File) > u.maxEntries {
		return fmt.Errorf("%w: more than %d entries", errUnpackLimit, u.maxEntries)
	}
	for _, zf := range zr.File {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := u.path(zf.Name)
		if err != nil {
			return err
		}
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			err = u.dir(p)
		case mode&fs.ModeSymlink != 0:
			err = u.zipSymlink(p, zf)
		case mode.IsRegular():
			err = u.zipFile(p, zf)
		default:
			err = fmt.Errorf("entry %q: mode %v (special file) is not unpacked", zf.Name, mode)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (u *unpacker) zipFile(p string, zf *zip.File) error {
	r, err := zf.Open()
	if err != nil {
		return fmt.Errorf("entry %q: %w", zf.Name, err)
	}
	defer r.Close()
	return u.file(p, zf.Mode(), r)
}

// maxLinkTarget bounds a zip symbolic link's target.
const maxLinkTarget = 4096

func (u *unpacker) zipSymlink(p string, zf *zip.File) error {
	r, err := zf.Open()
	if err != nil {
		return fmt.Errorf("entry %q: %w", zf.Name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxLinkTarget+1))
	if err != nil {
		return fmt.Errorf("entry %q: %w", zf.Name, err)
	}
	if len(b) > maxLinkTarget {
		return fmt.Errorf("entry %q: symbolic link target longer than %d bytes", zf.Name, maxLinkTarget)
	}
	return u.symlink(p, zf.Name, string(b))
}

// prepareWorkDir readies dir ("" for this process's), the tasks' working
// directory, as a NodeManager does a container's: spec's archives
// unpacked (unpackArchives), its files linked by their names (linkFiles).
// The returned function removes what it put there.
func prepareWorkDir(ctx context.Context, spec job.JobSpec, dir string) (cleanup func() error, err error) {
	if dir == "" {
		dir = "."
	}
	unpacked, err := unpackArchives(ctx, spec.Archives, dir)
	if err != nil {
		return nil, err
	}
	linked, err := linkFiles(spec.Files, dir)
	if err != nil {
		return nil, errors.Join(err, unpacked())
	}
	return func() error { return errors.Join(linked(), unpacked()) }, nil
}

// linkFiles makes each of files (JobSpec.Files) reachable by its base
// name in dir, the tasks' working directory, as a NodeManager localizes a
// YARN job's files into each container's: a file that is already there
// is left alone, another gets a symbolic link to it there. A name taken
// by something else is refused, so that nothing of the user's is hidden
// or overwritten. The returned function removes the links it made.
func linkFiles(files []string, dir string) (cleanup func() error, err error) {
	var made []string
	cleanup = func() error {
		var errs []error
		for _, l := range made {
			if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		made = nil
		return errors.Join(errs...)
	}
	for _, f := range files {
		src, err := filepath.Abs(f)
		if err != nil {
			return nil, errors.Join(err, cleanup())
		}
		fi, err := os.Stat(src)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("local: --files %s: %w", f, err), cleanup())
		}
		dst := filepath.Join(dir, filepath.Base(src))
		switch have, err := os.Stat(dst); {
		case err == nil && os.SameFile(fi, have):
			continue // already in the working directory
		case err == nil || !errors.Is(err, fs.ErrNotExist):
			return nil, errors.Join(fmt.Errorf("local: --files %s: %s is taken in the tasks' working directory; rename one of them", f, dst), cleanup())
		}
		if err := os.Symlink(src, dst); err != nil {
			return nil, errors.Join(fmt.Errorf("local: --files %s: %w", f, err), cleanup())
		}
		made = append(made, dst)
	}
	return cleanup, nil
}
