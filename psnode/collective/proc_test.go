package collective_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/collective"
	"github.com/spindle-ps/spindle/psnode/launch"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// The test binary doubles as the job's program: with SPINDLE_TEST_CHILD
// set it runs one node of a job (the scheduler or a worker; the jobs have
// no servers) instead of the tests, and SPINDLE_TEST_MODE says what the
// workers do.
func TestMain(m *testing.M) {
	if os.Getenv("SPINDLE_TEST_CHILD") == "collective" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

const (
	hbEvery   = 200 * time.Millisecond
	hbTimeout = 2 * time.Second
)

func childMain() int {
	l := logrus.New()
	l.Out = os.Stderr
	log := logrus.NewEntry(l).WithField("pid", os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	n, err := launch.Start(ctx, os.LookupEnv, os.Environ(), log)
	if err != nil {
		fmt.Printf("START FAILED %v\n", err)
		return 1
	}
	defer n.Close()
	if n.Role() == transport.RoleWorker {
		err = workerMain(ctx, n)
	}
	if err == nil {
		// The scheduler waits in this barrier while the workers run.
		fctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
		err = n.Finalize(fctx)
		cancel()
	}
	if err != nil {
		fmt.Printf("FAILED %v\n", err)
		return 1
	}
	fmt.Println("DONE")
	return 0
}

func workerMain(ctx context.Context, n *psnode.Node) error {
	if dir := os.Getenv("SPINDLE_TEST_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-worker%d.pprof", n.Rank())))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	chunk, _ := strconv.Atoi(os.Getenv("SPINDLE_TEST_CHUNK"))
	g, err := collective.New(n, collective.Options{ChunkBytes: chunk})
	if err != nil {
		return err
	}
	defer g.Close()
	switch mode := os.Getenv("SPINDLE_TEST_MODE"); mode {
	case "suite":
		return suite(ctx, n, g)
	case "kill":
		return killLoop(ctx, g)
	case "bench":
		return benchChild(ctx, n, g)
	default:
		return fmt.Errorf("unknown SPINDLE_TEST_MODE %q", mode)
	}
}

// killLoop runs AllReduce until one fails (a member was killed), and
// reports the error.
func killLoop(ctx context.Context, g *collective.Group) error {
	buf := make([]float32, 1<<20)
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := collective.AllReduce(cctx, g, buf, collective.Sum)
		cancel()
		if err != nil {
			fmt.Printf("COLLECTIVE FAILED dead=%v %v\n", errors.Is(err, psnode.ErrNodeDead), err)
			// The rest of the group is unusable: later calls fail at once.
			err2 := collective.Barrier(ctx, g)
			fmt.Printf("LATER FAILED same=%v\n", err2 != nil && err2.Error() == err.Error())
			return nil
		}
		if i == 2 {
			fmt.Println("LOOPING")
		}
	}
}

// proc is one child process of a job, its stdout lines on a channel.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncbuf.Buffer
	exited chan error
}

func startProc(t testing.TB, name string, env []string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, stdin: in, lines: make(chan string, 1<<16), stderr: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(p.stderr.String(), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// expect waits for a line with prefix, failing on a FAILED line, an exit
// or the deadline.
func (p *proc) expect(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.lines = nil
				return "", fmt.Errorf("%s exited before printing %q", p.name, prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
			if strings.HasPrefix(l, "FAILED") || strings.HasPrefix(l, "START FAILED") {
				return "", fmt.Errorf("%s: %s", p.name, l)
			}
		case <-ctx.Done():
			return "", fmt.Errorf("%s: no %q line: %w", p.name, prefix, ctx.Err())
		}
	}
}

// collect returns every line with prefix until the process exits, and
// its exit error (or the first FAILED line).
func (p *proc) collect(ctx context.Context, prefix string) ([]string, error) {
	var got []string
	var failed error
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.lines = nil
				select {
				case err := <-p.exited:
					if failed != nil {
						return got, failed
					}
					return got, err
				case <-ctx.Done():
					return got, fmt.Errorf("%s did not exit: %w", p.name, ctx.Err())
				}
			}
			if strings.HasPrefix(l, prefix) {
				got = append(got, l)
			}
			if failed == nil && (strings.HasPrefix(l, "FAILED") || strings.HasPrefix(l, "START FAILED")) {
				failed = fmt.Errorf("%s: %s", p.name, l)
			}
		case <-ctx.Done():
			return got, fmt.Errorf("%s did not exit: %w", p.name, ctx.Err())
		}
	}
}

// job is a scheduler and workers, each its own process, over ZeroMQ on
// loopback.
type job struct {
	sched   *proc
	workers []*proc
}

func startJob(t testing.TB, workers int, mode string, extra ...string) *job {
	t.Helper()
	common := append([]string{
		"SPINDLE_TEST_CHILD=collective",
		"SPINDLE_TEST_MODE=" + mode,
		conf.EnvNumWorker + "=" + strconv.Itoa(workers),
		conf.EnvNumServer + "=0",
		conf.EnvRootURI + "=127.0.0.1",
		conf.EnvRootPort + "=" + strconv.Itoa(nettest.FreePort(t)),
		conf.EnvNodeHost + "=127.0.0.1",
		conf.EnvHeartbeatInterval + "=" + strconv.FormatFloat(hbEvery.Seconds(), 'g', -1, 64),
		conf.EnvHeartbeatTimeout + "=" + strconv.FormatFloat(hbTimeout.Seconds(), 'g', -1, 64),
		conf.EnvJobSecret + "=collective-test",
		conf.EnvRegisterTimeout + "=60",
		// Finalize's barrier (bounded by this) waits while the workers
		// run the suite or the benchmark.
		conf.EnvShutdownTimeout + "=900",
	}, extra...)
	env := func(role string, task int) []string {
		e := append([]string{conf.EnvRole + "=" + role}, common...)
		if task >= 0 {
			e = append(e, conf.EnvTaskID+"="+strconv.Itoa(task))
		}
		return e
	}
	j := &job{sched: startProc(t, "scheduler", env("scheduler", -1))}
	for r := range workers {
		j.workers = append(j.workers, startProc(t, fmt.Sprintf("worker%d", r), env("worker", r)))
	}
	return j
}
