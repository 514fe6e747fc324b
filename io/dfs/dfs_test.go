package dfs_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/io/dfs"
)

func TestLocalSuite(t *testing.T) {
	t.Parallel()
	runSuite(t, dfs.Local{}, t.TempDir(), dfs.CreateOptions{})
}

func TestParseURI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    dfs.URI
		wantErr string
	}{
		{in: "hdfs://nn:8020/a/b", want: dfs.URI{Scheme: "hdfs", Authority: "nn:8020", Path: "/a/b"}},
		{in: "hdfs://nn/a//b/../c/", want: dfs.URI{Scheme: "hdfs", Authority: "nn", Path: "/a/c"}},
		{in: "hdfs://nn:8020", want: dfs.URI{Scheme: "hdfs", Authority: "nn:8020", Path: "/"}},
		{in: "hdfs:///logs/2026-11-*/*.libsvm", want: dfs.URI{Scheme: "hdfs", Path: "/logs/2026-11-*/*.libsvm"}},
		{in: "HDFS:///a?b[c]", want: dfs.URI{Scheme: "hdfs", Path: "/a?b[c]"}},
		{in: "hdfs://[::1]:8020/x", want: dfs.URI{Scheme: "hdfs", Authority: "[::1]:8020", Path: "/x"}},
		{in: "file:///tmp/x", want: dfs.URI{Scheme: "file", Path: "/tmp/x"}},
		{in: "file://localhost/tmp/x", want: dfs.URI{Scheme: "file", Path: "/tmp/x"}},
		{in: "file:/tmp/x", want: dfs.URI{Scheme: "file", Path: "/tmp/x"}},
		{in: "/tmp/x/", want: dfs.URI{Scheme: "file", Path: "/tmp/x"}},
		{in: "data/train.libsvm", want: dfs.URI{Scheme: "file", Path: "data/train.libsvm"}},
		{in: "data/a:b", want: dfs.URI{Scheme: "file", Path: "data/a:b"}},
		{in: "", wantErr: "empty"},
		{in: "hdfs:/x", wantErr: "want hdfs://"},
		{in: "hdfs://us er@nn/x", wantErr: "bad authority"},
		{in: "file://otherhost/x", wantErr: "no host"},
		{in: "s3a://bucket/x", wantErr: "unsupported scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := dfs.ParseURI(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURI(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseURI(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	hc := conf.HadoopConf{"fs.defaultFS": "hdfs://nn.example:9000"}
	r := dfs.NewResolver(hc, "alice")
	t.Cleanup(func() { r.Close() })
	ctx := context.Background()
	tests := []struct {
		uri      string
		wantURI  string // fsys.URI(name)
		wantName string
		wantErr  string
	}{
		{uri: "hdfs:///a/b", wantURI: "hdfs://nn.example:9000/a/b", wantName: "/a/b"},
		{uri: "hdfs://other:1/a", wantURI: "hdfs://other:1/a", wantName: "/a"},
		{uri: "hdfs://bare/a", wantURI: "hdfs://bare/a", wantName: "/a"},
		{uri: "file:///x/y", wantURI: "file:///x/y", wantName: "/x/y"},
		{uri: "/x/y", wantURI: "file:///x/y", wantName: "/x/y"},
		{uri: "ftp://x/y", wantErr: "unsupported scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			t.Parallel()
			fsys, name, err := r.Resolve(ctx, tt.uri)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.wantName || fsys.URI(name) != tt.wantURI {
				t.Errorf("Resolve(%q) = %s (name %q), want %s (%q)", tt.uri, fsys.URI(name), name, tt.wantURI, tt.wantName)
			}
		})
	}
	a, _, _ := r.Resolve(ctx, "hdfs:///a")
	b, _, _ := r.Resolve(ctx, "hdfs://nn.example:9000/b")
	if a != b {
		t.Errorf("two URIs of one NameNode got two clients")
	}

	local := dfs.NewResolver(conf.HadoopConf{}, "alice")
	defer local.Close()
	if _, _, err := local.Resolve(ctx, "hdfs:///x"); err == nil || !strings.Contains(err.Error(), "fs.defaultFS") {
		t.Errorf("hdfs:/// without an hdfs fs.defaultFS: %v", err)
	}
	r2 := dfs.NewResolver(hc, "alice")
	r2.Close()
	if _, _, err := r2.Resolve(ctx, "hdfs:///x"); !errors.Is(err, dfs.ErrClosed) {
		t.Errorf("Resolve after Close: %v", err)
	}
}

func TestRemoteErrorIs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class  string
		target error
	}{
		{"java.io.FileNotFoundException", fs.ErrNotExist},
		{"org.apache.hadoop.security.AccessControlException", fs.ErrPermission},
		{"org.apache.hadoop.fs.FileAlreadyExistsException", fs.ErrExist},
		{"org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException", fs.ErrExist},
		{"org.apache.hadoop.fs.PathIsNotEmptyDirectoryException", syscall.ENOTEMPTY},
		{"org.apache.hadoop.fs.ParentNotDirectoryException", syscall.ENOTDIR},
		{"org.apache.hadoop.fs.InvalidPathException", fs.ErrInvalid},
	}
	all := []error{fs.ErrNotExist, fs.ErrPermission, fs.ErrExist, fs.ErrInvalid, syscall.ENOTEMPTY, syscall.ENOTDIR}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			t.Parallel()
			err := error(&dfs.RemoteError{Method: "m", Class: tt.class, Message: "line one\n\tat stack"})
			wrapped := errors.Join(errors.New("context"), err)
			for _, target := range all {
				if got := errors.Is(wrapped, target); got != (target == tt.target) {
					t.Errorf("errors.Is(%s, %v) = %v", tt.class, target, got)
				}
			}
			if strings.Contains(err.Error(), "stack") {
				t.Errorf("Error() shows the stack trace: %q", err.Error())
			}
		})
	}
	long := &dfs.RemoteError{Method: "m", Class: "c", Message: strings.Repeat("x", 10000)}
	if len(long.Error()) > 400 {
		t.Errorf("Error() of a long message has %d bytes", len(long.Error()))
	}
}

func TestLocalErrorsNameTheURI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	_, err := dfs.Local{}.Create(ctx, filepath.Join(locked, "f"), dfs.CreateOptions{})
	if os.Geteuid() == 0 {
		if err != nil {
			t.Fatalf("root Create in a 000 directory: %v", err)
		}
	} else if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "file://"+locked+"/f") {
		t.Errorf("Create in a 000 directory: %v", err)
	}
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentNamenode accepts connections and never answers, like a NameNode
// stuck in a long pause.
func silentNamenode(t *testing.T) string {
	addr, _ := nettest.Silent(t)
	return addr
}

// countingSilentNamenode is silentNamenode that also reports how many
// connections it has accepted.
func countingSilentNamenode(t *testing.T) (string, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	addr := nettest.Serve(t, func(net.Conn) {
		mu.Lock()
		n++
		mu.Unlock()
	})
	return addr, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestAbortedCallReconnects checks that a NameNode call cut short by its
// context leaves no poisoned connection behind: the next call dials anew.
func TestAbortedCallReconnects(t *testing.T) {
	t.Parallel()
	addr, accepted := countingSilentNamenode(t)
	h, err := dfs.NewHDFS(dfs.HDFSOptions{Authority: addr, Namenodes: []string{addr}, User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := 1; i <= 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := h.Stat(ctx, "/x")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d: %v", i, err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for accepted() < i && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if accepted() != i {
			t.Fatalf("after %d aborted calls, %d connections", i, accepted())
		}
	}
}

func TestUnreachableNamenodeIsBounded(t *testing.T) {
	t.Parallel()
	refused := unusedAddr(t)
	silent := silentNamenode(t)
	tests := []struct {
		name     string
		addr     string
		ctxLimit time.Duration // 0: no deadline on the context
		rpc      time.Duration
		want     error
	}{
		{name: "refused", addr: refused, ctxLimit: 5 * time.Second, want: syscall.ECONNREFUSED},
		{name: "silent with a context deadline", addr: silent, ctxLimit: 500 * time.Millisecond, want: context.DeadlineExceeded},
		{name: "silent without a context deadline", addr: silent, rpc: 500 * time.Millisecond, want: os.ErrDeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := dfs.NewHDFS(dfs.HDFSOptions{Authority: tt.addr, Namenodes: []string{tt.addr}, User: "u", RPCTimeout: tt.rpc})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			ctx := context.Background()
			if tt.ctxLimit > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxLimit)
				defer cancel()
			}
			start := time.Now()
			_, err = h.Stat(ctx, "/x")
			took := time.Since(start)
			if err == nil {
				t.Fatal("Stat succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want one matching %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.addr) {
				t.Errorf("err = %v does not name %s", err, tt.addr)
			}
			if took > 3*time.Second {
				t.Errorf("took %v", took)
			}
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
		})
	}
}

func TestDialTimeoutFromConf(t *testing.T) {
	t.Parallel()
	hc := conf.HadoopConf{
		"fs.defaultFS":               "hdfs://nn:9000",
		"ipc.client.connect.timeout": "1500",
		"ipc.client.rpc-timeout.ms":  "0",
		"dfs.client.socket-timeout":  "2500",
	}
	o, err := dfs.HDFSOptionsFromConf(hc, "", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if o.Authority != "nn:9000" || len(o.Namenodes) != 1 || o.Namenodes[0] != "nn:9000" || o.User != "bob" {
		t.Errorf("options %+v", o)
	}
	if o.DialTimeout != 1500*time.Millisecond || o.RPCTimeout >= 0 || o.IOTimeout != 2500*time.Millisecond {
		t.Errorf("timeouts dial %v rpc %v io %v", o.DialTimeout, o.RPCTimeout, o.IOTimeout)
	}
	if _, err := dfs.HDFSOptionsFromConf(conf.HadoopConf{"fs.defaultFS": "hdfs://nn:1", "hadoop.security.authentication": "kerberos"}, "", "bob"); err == nil || !strings.Contains(err.Error(), "dfs.namenode.kerberos.principal") {
		t.Errorf("kerberos without the NameNode's principal: %v", err)
	}
	if _, err := dfs.HDFSOptionsFromConf(conf.HadoopConf{"fs.defaultFS": "hdfs://nn:1", "hadoop.security.authentication": "ldap"}, "", "bob"); err == nil {
		t.Error("an unknown authentication accepted")
	}
	ko, err := dfs.HDFSOptionsFromConf(conf.HadoopConf{"fs.defaultFS": "hdfs://nn:1", "hadoop.security.authentication": "Kerberos",
		"dfs.namenode.kerberos.principal": "nn/_HOST@EXAMPLE.COM", "dfs.data.transfer.protection": "authentication"}, "", "")
	if err != nil || !ko.Kerberos || ko.NamenodePrincipal != "nn/_HOST@EXAMPLE.COM" || ko.DataTransferProtection != "authentication" {
		t.Errorf("kerberos options %+v, %v", ko, err)
	}
	if _, err := dfs.NewHDFS(ko); err == nil || !strings.Contains(err.Error(), "kinit") {
		t.Errorf("a Kerberos file system without a login or a token: %v", err)
	}
	if _, err := dfs.HDFSOptionsFromConf(conf.HadoopConf{"fs.defaultFS": "hdfs://nn:1", "ipc.client.connect.timeout": "soon"}, "", "bob"); err == nil {
		t.Error("a malformed timeout accepted")
	}
}

func TestCancelWhileWaitingForTheNamenode(t *testing.T) {
	t.Parallel()
	addr := silentNamenode(t)
	h, err := dfs.NewHDFS(dfs.HDFSOptions{Authority: addr, Namenodes: []string{addr}, User: "u"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 3)
	for range 3 {
		go func() { _, err := h.Stat(ctx, "/x"); errs <- err }()
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	for range 3 {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a call did not return after its context was cancelled")
		}
	}
}

func TestLocalRemoveAllRefusesTheRoot(t *testing.T) {
	t.Parallel()
	if err := (dfs.Local{}).RemoveAll(context.Background(), "/"); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("RemoveAll(/) = %v", err)
	}
}

// FuzzParseURI checks that ParseURI never panics and that what it
// accepts formats back to a URI that parses to the same value.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"hdfs://nn:8020/a/b", "hdfs:///x/*.gz", "file:///tmp/x", "file:/x", "rel/p", "s3a://b/k", "hdfs://[::1]:1/x", "C:\\x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := dfs.ParseURI(s)
		if err != nil {
			return
		}
		if u.Scheme != "hdfs" && u.Scheme != "file" {
			t.Fatalf("ParseURI(%q) scheme %q", s, u.Scheme)
		}
		if u.Scheme == "hdfs" && !strings.HasPrefix(u.Path, "/") {
			t.Fatalf("ParseURI(%q): relative HDFS path %q", s, u.Path)
		}
		again, err := dfs.ParseURI(u.String())
		if err != nil || again != u {
			t.Fatalf("ParseURI(%q) = %+v; its String %q parses to %+v, %v", s, u, u.String(), again, err)
		}
	})
}

// TestLostConnectionIsRetriedOnce uses a NameNode that drops every
// connection after reading the request: a read-only call is tried on a
// second connection, a call that changes the namespace is not.
func TestLostConnectionIsRetriedOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			go func() {
				c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				io.Copy(io.Discard, c)
				c.Close()
			}()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return accepted }
	addr := l.Addr().String()
	tests := []struct {
		name  string
		op    func(ctx context.Context, h *dfs.HDFS) error
		conns int
	}{
		{"stat", func(ctx context.Context, h *dfs.HDFS) error { _, err := h.Stat(ctx, "/x"); return err }, 2},
		{"open", func(ctx context.Context, h *dfs.HDFS) error { _, err := h.Open(ctx, "/x"); return err }, 2},
		{"remove", func(ctx context.Context, h *dfs.HDFS) error { return h.Remove(ctx, "/x") }, 1},
	}
	for _, tt := range tests { // sequential: they share the listener's count
		before := count()
		h, err := dfs.NewHDFS(dfs.HDFSOptions{Authority: addr, Namenodes: []string{addr}, User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = tt.op(ctx, h)
		cancel()
		h.Close()
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		t.Logf("%s: %v", tt.name, err)
		if got := count() - before; got != tt.conns {
			t.Errorf("%s: %d connections, want %d (err %v)", tt.name, got, tt.conns, err)
		}
	}
}
