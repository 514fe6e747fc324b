package dfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// runSuite checks the FileSystem contract on fsys, inside the existing,
// empty directory root. Local and HDFS both pass it.
func runSuite(t *testing.T, fsys dfs.FileSystem, root string, opts dfs.CreateOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := func(elem ...string) string { return path.Join(append([]string{root}, elem...)...) }
	write := func(t *testing.T, name, content string, o dfs.CreateOptions) {
		t.Helper()
		w, err := fsys.Create(ctx, name, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, content); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, name string) string {
		t.Helper()
		f, err := fsys.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	wantErr := func(t *testing.T, err error, target error, name string) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("err = %v, want one matching %v", err, target)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), fsys.URI(name)) || !strings.HasPrefix(err.Error(), "dfs: ") {
			t.Fatalf("err = %v: want a dfs: *fs.PathError naming %s", err, fsys.URI(name))
		}
	}

	t.Run("write-read-stat", func(t *testing.T) {
		if err := fsys.MkdirAll(ctx, p("a", "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(ctx, p("a", "b"), 0o755); err != nil {
			t.Fatalf("MkdirAll of an existing directory: %v", err)
		}
		content := strings.Repeat("0123456789abcdef", 300) // several small HDFS blocks
		write(t, p("a", "f"), content, opts)
		if got := read(t, p("a", "f")); got != content {
			t.Fatalf("read back %d bytes, want %d", len(got), len(content))
		}
		fi, err := fsys.Stat(ctx, p("a", "f"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Name() != "f" || fi.Size() != int64(len(content)) || fi.IsDir() || !fi.Mode().IsRegular() {
			t.Errorf("Stat = %s %d dir=%v mode=%v", fi.Name(), fi.Size(), fi.IsDir(), fi.Mode())
		}
		if opts.BlockSize > 0 && dfs.BlockSize(fi) != opts.BlockSize {
			t.Errorf("BlockSize = %d, want %d", dfs.BlockSize(fi), opts.BlockSize)
		}
		if dfs.BlockSize(fi) <= 0 {
			t.Errorf("BlockSize = %d", dfs.BlockSize(fi))
		}
		di, err := fsys.Stat(ctx, p("a"))
		if err != nil || !di.IsDir() || di.Name() != "a" {
			t.Errorf("Stat(dir) = %v, %v", di, err)
		}

		f, err := fsys.Open(ctx, p("a", "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(content)) {
			t.Errorf("File.Stat = %v, %v", fi, err)
		}
		buf := make([]byte, 10)
		if _, err := io.ReadFull(f, buf); err != nil || string(buf) != content[:10] {
			t.Fatalf("Read = %q, %v", buf, err)
		}
		at := make([]byte, 16)
		if n, err := f.ReadAt(at, 1600); n != 16 || err != nil || string(at) != content[1600:1616] {
			t.Fatalf("ReadAt = %d %q %v", n, at, err)
		}
		if n, err := f.ReadAt(at, int64(len(content))-5); n != 5 || !errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt at the end = %d, %v; want 5, EOF", n, err)
		}
		if _, err := io.ReadFull(f, buf); err != nil || string(buf) != content[10:20] {
			t.Fatalf("Read after ReadAt = %q, %v (ReadAt moved the offset?)", buf, err)
		}
		if off, err := f.Seek(-6, io.SeekEnd); err != nil || off != int64(len(content))-6 {
			t.Fatalf("Seek = %d, %v", off, err)
		}
		rest, err := io.ReadAll(f)
		if err != nil || string(rest) != content[len(content)-6:] {
			t.Fatalf("read after Seek = %q, %v", rest, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("create-exists-overwrite", func(t *testing.T) {
		name := p("c")
		write(t, name, "first", opts)
		_, err := fsys.Create(ctx, name, opts)
		wantErr(t, err, fs.ErrExist, name)
		o := opts
		o.Overwrite = true
		write(t, name, "second", o)
		if got := read(t, name); got != "second" {
			t.Errorf("after overwrite: %q", got)
		}
		_, err = fsys.Create(ctx, p("missing-dir", "x"), opts)
		wantErr(t, err, fs.ErrNotExist, p("missing-dir", "x"))
	})

	t.Run("rename", func(t *testing.T) {
		write(t, p("r1"), "one", opts)
		if err := fsys.Rename(ctx, p("r1"), p("r2")); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(ctx, p("r1")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("old name after rename: %v", err)
		}
		// Replacing an existing file.
		write(t, p("r3"), "three", opts)
		if err := fsys.Rename(ctx, p("r3"), p("r2")); err != nil {
			t.Fatalf("rename over an existing file: %v", err)
		}
		if got := read(t, p("r2")); got != "three" {
			t.Errorf("after rename over: %q", got)
		}
		err := fsys.Rename(ctx, p("nope"), p("r4"))
		wantErr(t, err, fs.ErrNotExist, p("nope"))
		// A non-empty directory is never replaced.
		if err := fsys.MkdirAll(ctx, p("rd", "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(ctx, p("r2"), p("rd")); err == nil {
			t.Errorf("rename of a file over a non-empty directory succeeded")
		}
	})

	t.Run("readdir", func(t *testing.T) {
		if err := fsys.MkdirAll(ctx, p("l", "zdir"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"b", "a", "c"} {
			write(t, p("l", n), n, opts)
		}
		infos, err := fsys.ReadDir(ctx, p("l"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, fi := range infos {
			names = append(names, fi.Name())
			if fi.IsDir() != (fi.Name() == "zdir") {
				t.Errorf("%s: IsDir = %v", fi.Name(), fi.IsDir())
			}
		}
		if !reflect.DeepEqual(names, []string{"a", "b", "c", "zdir"}) {
			t.Errorf("ReadDir names = %v", names)
		}
		_, err = fsys.ReadDir(ctx, p("l", "a"))
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("ReadDir of a file: %v, want ENOTDIR", err)
		}
		_, err = fsys.ReadDir(ctx, p("l", "none"))
		wantErr(t, err, fs.ErrNotExist, p("l", "none"))
	})

	t.Run("remove", func(t *testing.T) {
		if err := fsys.MkdirAll(ctx, p("rm", "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, p("rm", "d", "f"), "x", opts)
		wantErr(t, fsys.Remove(ctx, p("rm", "none")), fs.ErrNotExist, p("rm", "none"))
		if err := fsys.Remove(ctx, p("rm", "d")); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			t.Errorf("Remove of a non-empty directory: %v", err)
		}
		if err := fsys.Remove(ctx, p("rm", "d", "f")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(ctx, p("rm", "d")); err != nil {
			t.Fatalf("Remove of an empty directory: %v", err)
		}
		write(t, p("rm", "g"), "x", opts)
		if err := fsys.RemoveAll(ctx, p("rm")); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(ctx, p("rm")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after RemoveAll: %v", err)
		}
		if err := fsys.RemoveAll(ctx, p("rm")); err != nil {
			t.Errorf("RemoveAll of a missing path: %v", err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := fsys.Stat(ctx, p("none"))
		wantErr(t, err, fs.ErrNotExist, p("none"))
		_, err = fsys.Open(ctx, p("none"))
		wantErr(t, err, fs.ErrNotExist, p("none"))
		write(t, p("file"), "x", opts)
		err = fsys.MkdirAll(ctx, p("file"), 0o755)
		if !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("MkdirAll over a file: %v", err)
		}
		if err := fsys.MkdirAll(ctx, p("file", "sub"), 0o755); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("MkdirAll under a file: %v, want ENOTDIR", err)
		}
	})

	t.Run("glob", func(t *testing.T) {
		if err := fsys.MkdirAll(ctx, p("g", "sub1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(ctx, p("g", "sub2"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"x1.txt", "x2.txt", "y1.txt", "_SUCCESS", "sub1/z.txt", "sub2/z.txt", "sub2/w.txt"} {
			write(t, p("g", n), n, opts)
		}
		tests := []struct {
			pattern string
			want    []string
		}{
			{"g/x*.txt", []string{"g/x1.txt", "g/x2.txt"}},
			{"g/?1.txt", []string{"g/x1.txt", "g/y1.txt"}},
			{"g/[xy]2*", []string{"g/x2.txt"}},
			{"g/[!x]*", []string{"g/_SUCCESS", "g/sub1", "g/sub2", "g/y1.txt"}},
			{"g/*/z.txt", []string{"g/sub1/z.txt", "g/sub2/z.txt"}},
			{"g/sub*/*", []string{"g/sub1/z.txt", "g/sub2/w.txt", "g/sub2/z.txt"}},
			{"g/x1.txt", []string{"g/x1.txt"}},
			{"g/\\x1.txt", []string{"g/x1.txt"}},
			{"g/none*", nil},
			{"g/*/none", nil},
			{"none/*", nil},
			{"g/x1.txt/*", nil},
		}
		for _, tt := range tests {
			t.Run(strings.ReplaceAll(tt.pattern, "/", "_"), func(t *testing.T) {
				got, err := fsys.Glob(ctx, p(tt.pattern))
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, w := range tt.want {
					want = append(want, p(w))
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Glob(%s) = %q, want %q", tt.pattern, got, want)
				}
			})
		}
		if _, err := fsys.Glob(ctx, p("g/[")); !errors.Is(err, path.ErrBadPattern) {
			t.Errorf("bad pattern: %v", err)
		}
	})

	t.Run("context", func(t *testing.T) {
		write(t, p("ctx"), strings.Repeat("x", 5000), opts)
		done, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := fsys.Stat(done, p("ctx")); !errors.Is(err, context.Canceled) {
			t.Errorf("Stat with a cancelled context: %v", err)
		}
		if _, err := fsys.Create(done, p("ctx2"), opts); !errors.Is(err, context.Canceled) {
			t.Errorf("Create with a cancelled context: %v", err)
		}
		fctx, fcancel := context.WithCancel(ctx)
		f, err := fsys.Open(fctx, p("ctx"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		fcancel()
		if _, err := f.Read(make([]byte, 10)); !errors.Is(err, context.Canceled) {
			t.Errorf("Read after the Open context ended: %v", err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		w, err := fsys.Create(wctx, p("ctx3"), opts)
		if err != nil {
			t.Fatal(err)
		}
		wcancel()
		if _, err := w.Write([]byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("Write after the Create context ended: %v", err)
		}
		w.Close()
		// The file system still works for other contexts.
		if _, err := fsys.Stat(ctx, p("ctx")); err != nil {
			t.Errorf("Stat after cancellations: %v", err)
		}
	})

	t.Run("closed-writer", func(t *testing.T) {
		w, err := fsys.Create(ctx, p("cw"), opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("x")); err == nil {
			t.Error("Write after Close succeeded")
		}
		if err := w.Close(); err == nil {
			t.Error("second Close succeeded")
		}
		if got := read(t, p("cw")); got != "" {
			t.Errorf("empty file reads %q", got)
		}
	})

	t.Run("binary", func(t *testing.T) {
		var b bytes.Buffer
		for i := range 70000 {
			b.WriteByte(byte(i * 7))
		}
		write(t, p("bin"), b.String(), opts)
		if got := read(t, p("bin")); got != b.String() {
			t.Errorf("binary content differs")
		}
	})
}
