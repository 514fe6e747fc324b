package launch_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/launch"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// The test binary doubles as the job's program: with SPINDLE_TEST_CHILD
// set it runs one node of the job instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("SPINDLE_TEST_CHILD") == "kvsum" {
		os.Exit(kvsumMain())
	}
	os.Exit(m.Run())
}

const (
	numKeys   = 1000
	maxKey    = 1 << 20
	hbEvery   = 200 * time.Millisecond
	hbTimeout = 2 * time.Second
)

// workerVector is what worker rank r pushes: integers, so float32 sums
// are exact.
func workerVector(rank int) []float32 {
	v := make([]float32, numKeys)
	for j := range v {
		v[j] = float32(rank*1000 + j%97 + 1)
	}
	return v
}

func testKeys() []uint64 {
	keys := make([]uint64, numKeys)
	for i := range keys {
		keys[i] = uint64(i) * (maxKey / numKeys)
	}
	return keys
}

// kvsumMain is one node of the sum job: workers push their vectors, wait
// for each other, and check that a pull returns the sum of all pushes.
func kvsumMain() int {
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
	switch n.Role() {
	case transport.RoleScheduler:
		events, unsub := n.Subscribe()
		defer unsub()
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case ev := <-events:
					fmt.Printf("EVENT %s %s rank=%d id=%d reason=%q\n", ev.Kind, ev.Node.Role, ev.Node.Rank, ev.Node.ID, ev.Reason)
				case <-done:
					return
				}
			}
		}()
		err = n.Finalize(ctx)
		close(done)
		wg.Wait()
	case transport.RoleServer:
		upd, _ := store.NewUpdater[float32]("sum", nil)
		h, herr := psnode.NewStoreHandler[float32](upd, 1)
		if herr == nil {
			_, herr = psnode.NewKVServer[float32](n, 0, h.Handle)
		}
		if herr != nil {
			fmt.Printf("SERVER FAILED %v\n", herr)
			return 1
		}
		err = n.Finalize(ctx)
	case transport.RoleWorker:
		err = kvsumWorker(ctx, n)
		if err == nil {
			err = n.Finalize(ctx)
		}
	}
	if err != nil {
		fmt.Printf("FAILED %v\n", err)
		return 1
	}
	fmt.Println("DONE")
	return 0
}

func kvsumWorker(ctx context.Context, n *psnode.Node) error {
	kv, err := psnode.NewKVWorker[float32](n, 0, 0)
	if err != nil {
		return err
	}
	keys := testKeys()
	ts, err := kv.Push(ctx, psnode.KVPairs[float32]{Keys: keys, Vals: workerVector(n.Rank())})
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	if err := n.Barrier(ctx, transport.WorkerGroup); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	var got []float32
	ts, err = kv.Pull(ctx, keys, &got, nil)
	if err == nil {
		err = kv.Wait(ctx, ts)
	}
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	want := make([]float32, numKeys)
	for r := 0; r < n.NumWorkers(); r++ {
		for j, v := range workerVector(r) {
			want[j] += v
		}
	}
	for j := range want {
		if got[j] != want[j] {
			return fmt.Errorf("key %d: pulled %v, want %v", keys[j], got[j], want[j])
		}
	}
	fmt.Printf("SUM OK rank=%d keys=%d\n", n.Rank(), len(got))
	if strconv.Itoa(n.Rank()) == os.Getenv("SPINDLE_TEST_VICTIM_RANK") {
		fmt.Println("WAITING")
		<-ctx.Done() // until killed
		return ctx.Err()
	}
	return nil
}

// proc is one child process of the job, its stdout lines on a channel.
type proc struct {
	name   string
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
	exited chan error
}

func startProc(t *testing.T, name string, env []string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, lines: make(chan string, 100), stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = &lockedBuffer{b: p.stderr}
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
			t.Logf("%s stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// expect waits for a line with prefix, failing on an unexpected exit or
// the deadline.
func (p *proc) expect(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
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

// wait waits for the process to exit and returns its error.
func (p *proc) wait(ctx context.Context) error {
	for {
		select {
		case l, ok := <-p.lines:
			if ok && (strings.HasPrefix(l, "FAILED") || strings.HasPrefix(l, "START FAILED")) {
				return fmt.Errorf("%s: %s", p.name, l)
			}
			if !ok {
				p.lines = nil
			}
		case err := <-p.exited:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s did not exit: %w", p.name, ctx.Err())
		}
	}
}

// TestKVSumAcrossProcesses runs 1 scheduler, 2 servers and 3 workers as
// separate processes over ZeroMQ on loopback. Every worker pushes a known
// vector and pulls exactly the sum; then one worker is killed with SIGKILL,
// the scheduler reports it dead within the heartbeat timeout, and the
// others finish.
func TestKVSumAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	common := []string{
		"SPINDLE_TEST_CHILD=kvsum",
		"SPINDLE_TEST_VICTIM_RANK=2",
		conf.EnvNumWorker + "=3",
		conf.EnvNumServer + "=2",
		conf.EnvRootURI + "=127.0.0.1",
		conf.EnvRootPort + "=" + strconv.Itoa(nettest.FreePort(t)),
		conf.EnvNodeHost + "=127.0.0.1",
		conf.EnvHeartbeatInterval + "=" + strconv.FormatFloat(hbEvery.Seconds(), 'g', -1, 64),
		conf.EnvHeartbeatTimeout + "=" + strconv.FormatFloat(hbTimeout.Seconds(), 'g', -1, 64),
		conf.EnvMaxDimension + "=" + strconv.Itoa(maxKey),
		conf.EnvJobSecret + "=multi-process-secret",
		conf.EnvRegisterTimeout + "=60",
		conf.EnvShutdownTimeout + "=30",
	}
	env := func(role string, task int) []string {
		e := append([]string{conf.EnvRole + "=" + role}, common...)
		if task >= 0 {
			e = append(e, conf.EnvTaskID+"="+strconv.Itoa(task))
		}
		return e
	}
	sched := startProc(t, "scheduler", env("scheduler", -1))
	var servers, workers []*proc
	for r := 0; r < 2; r++ {
		servers = append(servers, startProc(t, fmt.Sprintf("server%d", r), env("server", r)))
	}
	for r := 0; r < 3; r++ {
		workers = append(workers, startProc(t, fmt.Sprintf("worker%d", r), env("worker", r)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, w := range workers {
		if _, err := w.expect(ctx, "SUM OK"); err != nil {
			t.Fatal(err)
		}
	}
	victim := workers[2]
	if _, err := victim.expect(ctx, "WAITING"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// Detection is due hbTimeout after the last heartbeat, which came at
	// most hbEvery before the kill; allow one more interval for the check.
	bound := hbTimeout + 2*hbEvery
	dctx, dcancel := context.WithTimeout(ctx, bound+time.Second)
	defer dcancel()
	line, err := sched.expect(dctx, "EVENT died worker rank=2")
	if err != nil {
		t.Fatalf("scheduler did not report the killed worker dead: %v", err)
	}
	took := time.Since(killed)
	t.Logf("scheduler: %s (%v after SIGKILL; heartbeat timeout %v)", line, took.Round(time.Millisecond), hbTimeout)
	if took > bound {
		t.Errorf("death reported %v after the kill, beyond the heartbeat timeout bound %v", took, bound)
	}
	if err := victim.wait(ctx); err == nil {
		t.Error("killed worker exited cleanly")
	}

	var errs []error
	for _, p := range append(append([]*proc{sched}, servers...), workers[:2]...) {
		if err := p.wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
