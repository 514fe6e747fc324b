package dfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/io/dfs"
)

// TestHadoopSuite runs the FileSystem contract against the cluster's
// HDFS, with 1 KiB blocks so that files span several blocks.
func TestHadoopSuite(t *testing.T) {
	c := hadooptest.Connect(t)
	runSuite(t, c.FS, c.TempDir(t), dfs.CreateOptions{BlockSize: 1024})
}

// TestHadoopAgreesWithFsShell writes a file through the Go client and
// reads it back with Hadoop's own FsShell, and the other way round.
func TestHadoopAgreesWithFsShell(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rng := rand.New(rand.NewPCG(1, 2))
	var want bytes.Buffer
	for want.Len() < 50_000 {
		fmt.Fprintf(&want, "%d %d:%.4f\n", rng.IntN(2), rng.IntN(1000), rng.Float64())
	}
	w, err := c.FS.Create(ctx, dir+"/go-written", dfs.CreateOptions{BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(want.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, ok := hadooptest.HadoopShell(t, "-cat", c.FS.URI(dir+"/go-written"))
	if ok && !bytes.Equal(out, want.Bytes()) {
		t.Errorf("hdfs dfs -cat returned %d bytes, want the %d written", len(out), want.Len())
	}
	if !ok {
		return
	}
	// Listing and stat as Hadoop sees them.
	out, _ = hadooptest.HadoopShell(t, "-stat", "%b %o", c.FS.URI(dir+"/go-written"))
	if got, wantStat := strings.TrimSpace(string(out)), fmt.Sprintf("%d 4096", want.Len()); got != wantStat {
		t.Errorf("hdfs dfs -stat '%%b %%o' = %q, want %q", got, wantStat)
	}
	// A directory made by FsShell, read by Go.
	hadooptest.HadoopShell(t, "-mkdir", "-p", c.FS.URI(dir+"/shell/sub"))
	hadooptest.HadoopShell(t, "-cp", c.FS.URI(dir+"/go-written"), c.FS.URI(dir+"/shell/copy"))
	infos, err := c.FS.ReadDir(ctx, dir+"/shell")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Name() != "copy" || infos[1].Name() != "sub" || !infos[1].IsDir() {
		t.Errorf("ReadDir of the FsShell directory: %v", infos)
	}
	f, err := c.FS.Open(ctx, dir+"/shell/copy")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Errorf("Go read of the FsShell copy: %d bytes, %v", len(got), err)
	}
}

// TestHadoopResolveAndErrors checks URIs and error mapping against the
// real NameNode.
func TestHadoopResolveAndErrors(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fsys, name, err := c.Resolver.Resolve(ctx, "hdfs://"+strings.TrimPrefix(c.Conf.DefaultFS(), "hdfs://")+dir+"/missing")
	if err != nil {
		t.Fatal(err)
	}
	if fsys != dfs.FileSystem(c.FS) {
		t.Errorf("the fs.defaultFS authority resolved to another client")
	}
	_, err = fsys.Stat(ctx, name)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), c.Conf.DefaultFS()+dir+"/missing") {
		t.Errorf("Stat of a missing file: %v", err)
	}
	// A remote exception with no standard meaning keeps its Java class.
	_, err = fsys.Create(ctx, dir+"/tiny-blocks", dfs.CreateOptions{BlockSize: 100})
	var re *dfs.RemoteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "min-block-size") {
		t.Errorf("Create with a block size under the minimum: %v", err)
	} else {
		t.Logf("%v (class %s)", err, re.Class)
	}
	if err := fsys.MkdirAll(ctx, dir+"/f", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.RemoveAll(ctx, "/"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("RemoveAll(/) = %v", err)
	}
	if err := fsys.Remove(ctx, dir); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("Remove of a non-empty directory: %v", err)
	}
}

// TestHadoopReadReopens: a read that fails (here the client library's
// reader closed under the file, as a DataNode's refusal of an expired
// block token ends it) is tried once more on the file opened again at its
// offset, so that Read and ReadAt go on with the right bytes.
func TestHadoopReadReopens(t *testing.T) {
	c := hadooptest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := c.TempDir(t)
	data := make([]byte, 3<<20+77)
	for i := range data {
		data[i] = byte(i * 7 / 5)
	}
	c.WriteFile(t, dir+"/f", data, dfs.CreateOptions{BlockSize: 1 << 20})
	f, err := c.FS.Open(ctx, dir+"/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 1<<20+5)
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, data[:len(head)]) {
		t.Fatalf("the first part: %v, or the bytes differ", err)
	}
	dfs.BreakReader(f)
	b := make([]byte, 1000)
	n, err := f.(io.ReaderAt).ReadAt(b, 2<<20+3)
	if err != nil || n != len(b) || !bytes.Equal(b, data[2<<20+3:][:len(b)]) {
		t.Fatalf("ReadAt after the reader broke: %d bytes, %v, or the bytes differ", n, err)
	}
	dfs.BreakReader(f)
	rest, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(rest, data[len(head):]) {
		t.Fatalf("Read after the reader broke: %d bytes, %v; want the %d after the first part", len(rest), err, len(data)-len(head))
	}
}

// TestHadoopUnreachableNamenode points the cluster's configuration at a
// port nothing listens on: the error comes quickly and names it.
func TestHadoopUnreachableNamenode(t *testing.T) {
	c := hadooptest.Connect(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fsys, name, err := c.Resolver.Resolve(ctx, "hdfs://"+addr+"/x")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = fsys.Stat(ctx, name)
	if err == nil || !strings.Contains(err.Error(), addr) || time.Since(start) > 5*time.Second {
		t.Fatalf("Stat on a dead NameNode after %v: %v", time.Since(start), err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	// The live cluster is unaffected.
	if _, err := c.FS.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}
}

// TestHadoopConcurrentUse reads and writes from several goroutines on
// one client, with a cancellation in the middle.
func TestHadoopConcurrentUse(t *testing.T) {
	c := hadooptest.Connect(t)
	dir := c.TempDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			name := fmt.Sprintf("%s/f%d", dir, i)
			content := strings.Repeat(fmt.Sprintf("%d", i), 3000+i)
			w, err := c.FS.Create(ctx, name, dfs.CreateOptions{BlockSize: 1024})
			if err != nil {
				errs <- err
				return
			}
			if _, err := io.WriteString(w, content); err != nil {
				errs <- err
				return
			}
			if err := w.Close(); err != nil {
				errs <- err
				return
			}
			if i == 3 {
				cctx, ccancel := context.WithCancel(ctx)
				ccancel()
				if _, err := c.FS.Stat(cctx, name); !errors.Is(err, context.Canceled) {
					errs <- fmt.Errorf("cancelled Stat: %w", err)
					return
				}
			}
			f, err := c.FS.Open(ctx, name)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			got, err := io.ReadAll(f)
			if err != nil {
				errs <- err
				return
			}
			if string(got) != content {
				errs <- fmt.Errorf("%s: read %d bytes, want %d", name, len(got), len(content))
				return
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
