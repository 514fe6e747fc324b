package yarnclient

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/yarn"
)

// TestHadoopSubmitYARNRMLost: the ResourceManager stops answering while
// ps-submit follows a running application (its connections cut and new
// ones refused, as while it restarts). ps-submit asks again, as YARN's
// own client does, follows the application to its end once the RM
// answers, reports its success, and only then removes the staging
// directory, which the application needed all along.
func TestHadoopSubmitYARNRMLost(t *testing.T) {
	cl := hadooptest.Connect(t)
	bin := buildPSSubmit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rm := testRM(ctx, t, cl)
	px := newCutProxy(t, yarn.RMAddress(cl.Conf))
	confDir := confWith(t, map[string]string{
		"yarn.resourcemanager.address":                   px.ln.Addr().String(),
		"yarn.resourcemanager.connect.retry-interval.ms": "200",
	})

	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	script := fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.1; done; echo released`, started, release)
	run := startSubmit(ctx, t, rm, bin, []string{conf.EnvHadoopConfDir + "=" + confDir},
		"--cluster", "yarn", "-n", "1", "-s", "0", "--worker-memory", "128m", "--", "/bin/sh", "-c", script)
	cmd, out, copied, app := run.cmd, run.out, run.copied, run.app
	waitFile(ctx, t, started, out)

	px.down()
	if err := px.awaitRefused(ctx, copied, 2); err != nil {
		<-copied
		t.Fatalf("ps-submit did not try the resource manager again: %v\n%s", err, out)
	}
	px.up()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	<-copied
	t.Logf("ps-submit:\n%s", out)
	if err != nil {
		t.Fatalf("ps-submit: %v", err)
	}
	for _, want := range []string{"does not answer", "answers again"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ps-submit's output does not say %q", want)
		}
	}
	r, err := rm.ApplicationReport(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != yarn.AppFinished || r.FinalStatus != yarn.FinalSucceeded {
		t.Errorf("application %v ended %v %v, want FINISHED SUCCEEDED", app, r.State, r.FinalStatus)
	}
	checkStagingGone(t, cl, app)
}

// submitRun is a ps-submit process following a YARN application.
type submitRun struct {
	cmd    *exec.Cmd
	out    *syncbuf.Buffer // its standard output and error
	copied chan struct{}   // closed when its standard error is all in out
	app    yarn.ApplicationID
}

// startSubmit starts bin (ps-submit) with args and env added to this
// process's environment, and waits until it prints its application's id.
// The application does not outlive the test.
func startSubmit(ctx context.Context, t *testing.T, rm *yarn.RMClient, bin string, env []string, args ...string) submitRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	out := &syncbuf.Buffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	apps := make(chan yarn.ApplicationID, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(out, sc.Text())
			if m := appIDRE.FindStringSubmatch(sc.Text()); m != nil {
				if id, err := yarn.ParseApplicationID(m[1]); err == nil {
					select {
					case apps <- id:
					default:
					}
				}
			}
		}
	}()
	var app yarn.ApplicationID
	select {
	case app = <-apps:
	case <-ctx.Done():
		t.Fatalf("ps-submit printed no application id:\n%s", out)
	}
	t.Cleanup(func() {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if r, err := rm.ApplicationReport(kctx, app); err == nil && !r.State.Terminal() {
			_, _ = rm.Kill(kctx, app)
		}
	})
	return submitRun{cmd: cmd, out: out, copied: copied, app: app}
}

// waitFile waits until path exists, for as long as ctx allows.
func waitFile(ctx context.Context, t *testing.T, path string, out fmt.Stringer) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never appeared:\n%s", path, out)
		case <-tick.C:
		}
	}
}

// confWith copies the cluster's configuration directory and sets props
// in the copy's yarn-site.xml (later properties win); it returns the
// copy.
func confWith(t *testing.T, props map[string]string) string {
	t.Helper()
	src := os.Getenv(conf.EnvHadoopConfDir)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "yarn-site.xml" {
			var add strings.Builder
			for k, v := range props {
				fmt.Fprintf(&add, "<property><name>%s</name><value>%s</value></property>\n", k, v)
			}
			s := string(b)
			i := strings.LastIndex(s, "</configuration>")
			if i < 0 {
				t.Fatalf("%s has no </configuration>", e.Name())
			}
			b = []byte(s[:i] + add.String() + s[i:])
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// cutProxy forwards TCP connections to a target. down cuts every
// connection it carries and closes the ones that come after at once, as a
// server that restarts would, until up.
type cutProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	isDown  bool
	conns   map[net.Conn]bool
	refused int
	changed chan struct{} // closed and replaced when refused grows
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}, changed: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.down()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.isDown {
				p.refused++
				close(p.changed)
				p.changed = make(chan struct{})
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.mu.Unlock()
			wg.Go(func() { p.forward(c) })
		}
	})
	return p
}

func (p *cutProxy) forward(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.isDown {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, pair := range [][2]net.Conn{{s, c}, {c, s}} {
		wg.Go(func() {
			_, _ = io.Copy(pair[0], pair[1])
			pair[0].Close()
			pair[1].Close()
		})
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *cutProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = false
}

// awaitRefused waits until the proxy has refused n connections, or
// until gone is closed (the client ended).
func (p *cutProxy) awaitRefused(ctx context.Context, gone <-chan struct{}, n int) error {
	for {
		p.mu.Lock()
		got, changed := p.refused, p.changed
		p.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d connections refused: %w", got, ctx.Err())
		case <-gone:
			return fmt.Errorf("the client ended after %d connections refused", got)
		case <-changed:
		}
	}
}
