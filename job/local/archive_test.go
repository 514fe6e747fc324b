package local

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
)

// entry is one member of a test archive.
type entry struct {
	name, body, link string
	dir, hard        bool
	mode             int64
}

func tgzBytes(t testing.TB, entries []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		if e.mode != 0 {
			h.Mode = e.mode
		}
		switch {
		case e.dir:
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case e.hard:
			h.Typeflag, h.Size, h.Linkname = tar.TypeLink, 0, e.link
		case e.link != "":
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, e.link
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zipBytes(t testing.TB, entries []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch {
		case e.dir:
			h.Name = strings.TrimSuffix(e.name, "/") + "/"
			h.SetMode(fs.ModeDir | 0o755)
		case e.link != "":
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		default:
			mode := fs.FileMode(0o644)
			if e.mode != 0 {
				mode = fs.FileMode(e.mode)
			}
			h.SetMode(mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// writeArchive writes an archive of entries named name into dir.
func writeArchive(t testing.TB, dir, name string, entries []entry) string {
	t.Helper()
	p := filepath.Join(dir, name)
	data := tgzBytes(t, entries)
	if strings.HasSuffix(name, ".zip") {
		data = zipBytes(t, entries)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUnpackArchive(t *testing.T) {
	t.Parallel()
	good := []entry{
		{name: "conf", dir: true},
		{name: "conf/a.txt", body: "alpha\n"},
		{name: "bin/run.sh", body: "#!/bin/sh\necho run\n", mode: 0o755},
		{name: "link", link: "conf/a.txt"},
		{name: "conf/up", link: "../bin/run.sh"},
	}
	for _, kind := range []string{"x.tar.gz", "x.tgz", "x.zip"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			src := writeArchive(t, dir, kind, good)
			dst := filepath.Join(dir, "out")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := UnpackArchive(t.Context(), src, dst); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]string{"conf/a.txt": "alpha\n", "link": "alpha\n", "conf/up": "#!/bin/sh\necho run\n"} {
				if b, err := os.ReadFile(filepath.Join(dst, p)); err != nil || string(b) != want {
					t.Errorf("%s = %q, %v; want %q", p, b, err, want)
				}
			}
			if fi, err := os.Stat(filepath.Join(dst, "bin/run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
				t.Errorf("bin/run.sh lost its execute bit: %v %v", fi, err)
			}
		})
	}
}

func TestUnpackArchiveRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"parent", []entry{{name: "../escape", body: "x"}}, "outside"},
		{"nested parent", []entry{{name: "a/../../escape", body: "x"}}, "outside"},
		{"absolute", []entry{{name: "/tmp/escape", body: "x"}}, "outside"},
		{"symlink out", []entry{{name: "l", link: "../../etc/passwd"}}, "points outside"},
		{"symlink absolute", []entry{{name: "l", link: "/etc/passwd"}}, "absolute"},
	}
	for _, kind := range []string{"x.tar.gz", "x.zip"} {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				src := writeArchive(t, dir, kind, tt.entries)
				dst := filepath.Join(dir, "deep", "out")
				if err := os.MkdirAll(dst, 0o755); err != nil {
					t.Fatal(err)
				}
				err := UnpackArchive(t.Context(), src, dst)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err = %v, want it to say %q", err, tt.want)
				}
				if _, err := os.Lstat(filepath.Join(dir, "deep", "escape")); err == nil {
					t.Errorf("an entry was written outside")
				}
			})
		}
	}
	t.Run("hard link", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		src := writeArchive(t, dir, "x.tgz", []entry{{name: "a", body: "x"}, {name: "h", hard: true, link: "a"}})
		if err := UnpackArchive(t.Context(), src, t.TempDir()); err == nil || !strings.Contains(err.Error(), "hard link") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("limits", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, kind := range []string{"x.tgz", "x.zip"} {
			src := writeArchive(t, dir, kind, []entry{{name: "a", body: strings.Repeat("z", 100)}, {name: "b", body: "1"}, {name: "c", body: "2"}})
			if err := unpack(t.Context(), src, &unpacker{dst: t.TempDir(), maxBytes: 50, maxEntries: 10}); !errors.Is(err, errUnpackLimit) {
				t.Errorf("%s over the byte bound: %v", kind, err)
			}
			if err := unpack(t.Context(), src, &unpacker{dst: t.TempDir(), maxBytes: 1000, maxEntries: 2}); !errors.Is(err, errUnpackLimit) {
				t.Errorf("%s over the entry bound: %v", kind, err)
			}
		}
	})
	t.Run("not an archive", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		for _, name := range []string{"bad.tgz", "bad.zip"} {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("not an archive"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := UnpackArchive(t.Context(), p, t.TempDir()); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s: err = %v, want it to name the file", name, err)
			}
		}
	})
}

// FuzzUnpackTarGz: whatever the bytes, unpacking returns and writes
// nothing outside its directory.
func FuzzUnpackTarGz(f *testing.F) {
	f.Add(tgzBytes(f, []entry{{name: "a/b", body: "x"}, {name: "l", link: "a/b"}}))
	f.Add(tgzBytes(f, []entry{{name: "../x", body: "x"}}))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		src := filepath.Join(dir, "f.tgz")
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "in", "out")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = unpack(t.Context(), src, &unpacker{dst: dst, maxBytes: 1 << 20, maxEntries: 100})
		ents, _ := os.ReadDir(filepath.Join(dir, "in"))
		if len(ents) != 1 {
			t.Errorf("unpacking wrote beside its directory: %v", ents)
		}
	})
}

// TestRunLocalArchives: the tasks find each archive unpacked in their
// working directory, and nothing is left of it after the job; an
// existing directory of the same name is refused.
func TestRunLocalArchives(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := t.TempDir()
	tgz := writeArchive(t, src, "dict.tar.gz", []entry{{name: "words.txt", body: "from-tgz"}})
	zp := writeArchive(t, src, "conf.zip", []entry{{name: "sub/c.txt", body: "from-zip"}})
	work := t.TempDir()
	var out syncbuf.Buffer
	spec := job.JobSpec{Command: []string{"/bin/sh", "-c", "cat dict/words.txt; echo; cat cfg/sub/c.txt; echo"}, NumWorkers: 2, MaxAttempts: 1,
		Archives: []string{tgz, zp + "#cfg"}}
	res, err := Run(ctx, spec, Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), WorkDir: work})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job %v: %v\n%s", res.State, err, out.String())
	}
	for _, w := range []string{"[worker 0] from-tgz", "[worker 1] from-zip"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if ents, _ := os.ReadDir(work); len(ents) != 0 {
		t.Errorf("left in the working directory: %v", ents)
	}
	if err := os.Mkdir(filepath.Join(work, "dict"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, spec, Options{Environ: os.Environ(), Log: quietLog(), WorkDir: work})
	if err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("an existing directory: err = %v", err)
	}
	if _, serr := os.Stat(filepath.Join(work, "cfg")); serr == nil {
		t.Errorf("cfg unpacked although the job did not start")
	}
}

// TestRunLocalFiles: the tasks find each of the job's files by its name in
// their working directory, as on YARN, whether it lies there already or
// elsewhere; the links made for them are gone after the job, and a name
// taken by another file is refused before any task starts.
func TestRunLocalFiles(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, work := t.TempDir(), t.TempDir()
	far := filepath.Join(src, "vocab.txt")
	near := filepath.Join(work, "here.txt")
	for p, body := range map[string]string{far: "from-afar", near: "from-here"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out syncbuf.Buffer
	spec := job.JobSpec{Command: []string{"/bin/sh", "-c", "cat vocab.txt; echo; cat here.txt; echo"}, NumWorkers: 1, MaxAttempts: 1,
		Files: []string{far, near}}
	res, err := Run(ctx, spec, Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(), WorkDir: work})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("job %v: %v\n%s", res.State, err, out.String())
	}
	for _, w := range []string{"[worker 0] from-afar", "[worker 0] from-here"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if ents, _ := os.ReadDir(work); len(ents) != 1 || ents[0].Name() != "here.txt" {
		t.Errorf("the working directory holds %v after the job; want here.txt alone", ents)
	}
	// Another vocab.txt in the working directory: refused, and left as
	// it was.
	if err := os.WriteFile(filepath.Join(work, "vocab.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = Run(ctx, spec, Options{Environ: os.Environ(), Log: quietLog(), WorkDir: work})
	if err == nil || !strings.Contains(err.Error(), "--files "+far+": "+filepath.Join(work, "vocab.txt")+" is taken") {
		t.Errorf("a taken name: %v %v; want it refused, naming both", res.State, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "vocab.txt")); string(b) != "mine" {
		t.Errorf("the user's vocab.txt now reads %q", b)
	}
}
