package collective_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/collective"
)

var (
	ops   = []collective.Op{collective.Sum, collective.Mean, collective.Max, collective.Min}
	sizes = []int{1, 7, 1001, 12345, 40000}
)

// input is rank's value at index i: small integers, so that sums of a
// few ranks are exact in every element type and the reference is exact.
func input[T collective.Elem](rank, i, seed int) T {
	return T((i*31+rank*17+seed*7)%201 - 100)
}

// reference reduces every rank's input at index i in rank order.
func reference[T collective.Elem](op collective.Op, size, i, seed int) T {
	acc := input[T](0, i, seed)
	for r := 1; r < size; r++ {
		v := input[T](r, i, seed)
		switch op {
		case collective.Sum, collective.Mean:
			acc += v
		case collective.Max:
			acc = max(acc, v)
		case collective.Min:
			acc = min(acc, v)
		}
	}
	if op == collective.Mean {
		acc /= T(size)
	}
	return acc
}

func inputs[T collective.Elem](rank, n, seed int) []T {
	buf := make([]T, n)
	for i := range buf {
		buf[i] = input[T](rank, i, seed)
	}
	return buf
}

func hashOf[T collective.Elem](buf []T) string {
	h := fnv.New64a()
	if len(buf) > 0 {
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*int(unsafe.Sizeof(buf[0]))))
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func typeName[T collective.Elem]() string { return fmt.Sprintf("%T", T(0)) }

// check compares got[lo:hi] with want(i), naming the first difference.
func check[T collective.Elem](what string, got []T, lo, hi int, want func(i int) T) error {
	for i := lo; i < hi; i++ {
		if w := want(i); got[i] != w {
			return fmt.Errorf("%s: element %d is %v, want %v", what, i, got[i], w)
		}
	}
	return nil
}

// suiteType runs every collective on T for every size and op against the
// naive reference.
func suiteType[T collective.Elem](ctx context.Context, g *collective.Group) error {
	r, size := g.Rank(), g.Size()
	tn := typeName[T]()
	for seed, n := range sizes {
		for _, op := range ops {
			name := fmt.Sprintf("AllReduce %s %s n=%d", tn, op, n)
			buf := inputs[T](r, n, seed)
			if err := collective.AllReduce(ctx, g, buf, op); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := check(name, buf, 0, n, func(i int) T { return reference[T](op, size, i, seed) }); err != nil {
				return err
			}
			fmt.Printf("HASH %s %s\n", strings.ReplaceAll(name, " ", "_"), hashOf(buf))

			root := n % size
			name = fmt.Sprintf("Reduce %s %s n=%d root=%d", tn, op, n, root)
			buf = inputs[T](r, n, seed)
			if err := collective.Reduce(ctx, g, buf, op, root); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if r == root {
				if err := check(name, buf, 0, n, func(i int) T { return reference[T](op, size, i, seed) }); err != nil {
					return err
				}
			}

			name = fmt.Sprintf("ReduceScatter %s %s n=%d", tn, op, n)
			buf = inputs[T](r, n, seed)
			if err := collective.ReduceScatter(ctx, g, buf, op); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			lo, hi := g.Shard(n, r)
			if err := check(name, buf, lo, hi, func(i int) T { return reference[T](op, size, i, seed) }); err != nil {
				return err
			}
		}

		name := fmt.Sprintf("AllGather %s n=%d", tn, n)
		buf := make([]T, n)
		for i := range buf {
			buf[i] = 77 // not ours: overwritten
		}
		lo, hi := g.Shard(n, r)
		copy(buf[lo:hi], inputs[T](r, n, seed)[lo:hi])
		if err := collective.AllGather(ctx, g, buf); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		owner := make([]int, n)
		for s := range size {
			lo, hi := g.Shard(n, s)
			for i := lo; i < hi; i++ {
				owner[i] = s
			}
		}
		if err := check(name, buf, 0, n, func(i int) T { return input[T](owner[i], i, seed) }); err != nil {
			return err
		}

		root := (n + 1) % size
		name = fmt.Sprintf("Broadcast %s n=%d root=%d", tn, n, root)
		buf = inputs[T](r, n, seed)
		if err := collective.Broadcast(ctx, g, buf, root); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := check(name, buf, 0, n, func(i int) T { return input[T](root, i, seed) }); err != nil {
			return err
		}
	}
	return nil
}

// randomSum sums random values, whose rounding depends on the order of
// the additions: the result must be the same bits on every rank (the
// parent compares the hashes) and in a second run, and within a few
// roundings of the exact sum (tol relative to the sum of magnitudes).
func randomSum[T float32 | float64](ctx context.Context, g *collective.Group, n int, tol float64) error {
	r, size := g.Rank(), g.Size()
	vals := func(rank int) []T {
		rng := rand.New(rand.NewSource(int64(rank*1000 + n)))
		out := make([]T, n)
		for i := range out {
			out[i] = T(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(8)-4)))
		}
		return out
	}
	want, mag := make([]float64, n), make([]float64, n)
	for s := range size {
		for i, v := range vals(s) {
			want[i] += float64(v)
			mag[i] += math.Abs(float64(v))
		}
	}
	var first string
	for run := range 2 {
		buf := vals(r)
		if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
			return err
		}
		for i, v := range buf {
			if d := math.Abs(float64(v) - want[i]); d > tol*mag[i] {
				return fmt.Errorf("random sum %s n=%d: element %d is %v, want %v", typeName[T](), n, i, v, want[i])
			}
		}
		h := hashOf(buf)
		if run == 0 {
			first = h
			fmt.Printf("HASH random_%s_n=%d %s\n", typeName[T](), n, h)
		} else if h != first {
			return fmt.Errorf("random sum %s n=%d: second run gave other bits (%s, then %s)", typeName[T](), n, first, h)
		}
	}
	return nil
}

// barriers checks that Barrier waits for everyone: each rank leaves a
// file before the barrier and finds every other rank's after it.
func barriers(ctx context.Context, g *collective.Group) error {
	dir := os.Getenv("SPINDLE_TEST_DIR")
	for round := range 3 {
		mark := func(r int) string { return filepath.Join(dir, fmt.Sprintf("round%d-rank%d", round, r)) }
		if err := os.WriteFile(mark(g.Rank()), nil, 0o644); err != nil {
			return err
		}
		if err := collective.Barrier(ctx, g); err != nil {
			return fmt.Errorf("barrier %d: %w", round, err)
		}
		for r := range g.Size() {
			if _, err := os.Stat(mark(r)); err != nil {
				return fmt.Errorf("after barrier %d: rank %d has not arrived: %w", round, r, err)
			}
		}
	}
	return nil
}

// big runs the large cases on a second group with the default chunk.
func big(ctx context.Context, n *psnode.Node) error {
	elems, _ := strconv.Atoi(os.Getenv("SPINDLE_TEST_BIG"))
	if elems == 0 {
		return nil
	}
	g, err := collective.New(n, collective.Options{App: collective.DefaultApp - 1})
	if err != nil {
		return err
	}
	defer g.Close()
	r, size := g.Rank(), g.Size()
	const seed = 3
	buf := inputs[float32](r, elems, seed)
	before := g.Stats()
	if err := collective.AllReduce(ctx, g, buf, collective.Sum); err != nil {
		return fmt.Errorf("AllReduce float32 n=%d: %w", elems, err)
	}
	sent := g.Stats().BytesSent - before.BytesSent
	if err := check("big AllReduce", buf, 0, elems, func(i int) float32 { return reference[float32](collective.Sum, size, i, seed) }); err != nil {
		return err
	}
	fmt.Printf("HASH big_allreduce %s\n", hashOf(buf))
	// The ring sends 2(N-1)/N of the buffer, plus headers.
	m := float64(elems * 4)
	fmt.Printf("SENT %d ring %.0f ratio %.4f\n", sent, 2*float64(size-1)/float64(size)*m, float64(sent)/(2*float64(size-1)/float64(size)*m))

	root := size - 1
	buf = inputs[float32](r, elems, seed)
	if err := collective.Broadcast(ctx, g, buf, root); err != nil {
		return fmt.Errorf("Broadcast float32 n=%d: %w", elems, err)
	}
	return check("big Broadcast", buf, 0, elems, func(i int) float32 { return input[float32](root, i, seed) })
}

func suite(ctx context.Context, n *psnode.Node, g *collective.Group) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := barriers(ctx, g); err != nil {
		return err
	}
	if err := suiteType[float32](ctx, g); err != nil {
		return err
	}
	if err := suiteType[float64](ctx, g); err != nil {
		return err
	}
	if err := suiteType[int64](ctx, g); err != nil {
		return err
	}
	for _, sz := range []int{1001, 40000} {
		if err := randomSum[float32](ctx, g, sz, 1e-5); err != nil {
			return err
		}
		if err := randomSum[float64](ctx, g, sz, 1e-12); err != nil {
			return err
		}
	}
	if err := big(ctx, n); err != nil {
		return err
	}
	fmt.Println("SUITE OK")
	return nil
}

// TestCollectivesAcrossProcesses runs every collective, for every element
// type, op and a range of sizes (1 element to 64 MiB), in jobs of 2, 3
// and 4 worker processes over ZeroMQ on loopback, against a naive
// reference; results whose bits depend on the reduction order must be
// the same on every rank.
func TestCollectivesAcrossProcesses(t *testing.T) {
	bigElems := 16 << 20 // 64 MiB of float32
	if testing.Short() {
		bigElems = 1 << 20
	}
	for _, workers := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("N=%d", workers), func(t *testing.T) {
			j := startJob(t, workers, "suite",
				// Liveness is not under test here: a long heartbeat
				// timeout keeps a starved process on a busy machine
				// from being declared dead.
				conf.EnvHeartbeatTimeout+"=60",
				"SPINDLE_TEST_CHUNK=4096",
				"SPINDLE_TEST_BIG="+strconv.Itoa(bigElems),
				"SPINDLE_TEST_DIR="+t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			hashes := make([]map[string]string, workers)
			for r, w := range j.workers {
				lines, err := w.collect(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				hashes[r] = map[string]string{}
				ok := false
				for _, l := range lines {
					f := strings.Fields(l)
					switch {
					case len(f) == 3 && f[0] == "HASH":
						hashes[r][f[1]] = f[2]
					case strings.HasPrefix(l, "SENT"):
						t.Logf("rank %d: %s", r, l)
					case l == "SUITE OK":
						ok = true
					}
				}
				if !ok {
					t.Fatalf("worker %d did not finish the suite", r)
				}
			}
			if _, err := j.sched.collect(ctx, ""); err != nil {
				t.Fatal(err)
			}
			if len(hashes[0]) < 60 {
				t.Fatalf("rank 0 reported %d results, want every case", len(hashes[0]))
			}
			for r := 1; r < workers; r++ {
				if len(hashes[r]) != len(hashes[0]) {
					t.Errorf("rank %d reported %d results, rank 0 %d", r, len(hashes[r]), len(hashes[0]))
				}
				for k, h := range hashes[0] {
					if hashes[r][k] != h {
						t.Errorf("%s: rank %d has bits %s, rank 0 %s", k, r, hashes[r][k], h)
					}
				}
			}
		})
	}
}

// TestMemberKilledMidAllReduce kills one of three workers with SIGKILL
// while they run AllReduce in a loop: the others' pending collective
// fails with an error naming the dead member, not with their own
// deadline, and so do later ones.
func TestMemberKilledMidAllReduce(t *testing.T) {
	killMidAllReduce(t, "", "SPINDLE_TEST_CHUNK=65536")
}

// TestKilledMemberFoundByItsConnection is TestMemberKilledMidAllReduce
// with a heartbeat timeout longer than the test may run: the scheduler
// must find the dead worker through its lost connection, as it does a
// process that ended, and say so.
func TestKilledMemberFoundByItsConnection(t *testing.T) {
	killMidAllReduce(t, "its connection was lost", "SPINDLE_TEST_CHUNK=65536", conf.EnvHeartbeatTimeout+"=600")
}

// killMidAllReduce is TestMemberKilledMidAllReduce for a job started with
// extra, whose survivors' errors must also contain reason.
func killMidAllReduce(t *testing.T, reason string, extra ...string) {
	j := startJob(t, 3, "kill", extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, w := range j.workers {
		if _, err := w.expect(ctx, "LOOPING"); err != nil {
			t.Fatal(err)
		}
	}
	victim := j.workers[1]
	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, r := range []int{0, 2} {
		w := j.workers[r]
		line, err := w.expect(ctx, "COLLECTIVE FAILED")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("worker %d, %v after the kill: %s", r, time.Since(killed).Round(time.Millisecond), line)
		if !strings.HasPrefix(line, "COLLECTIVE FAILED dead=true ") {
			t.Errorf("worker %d: the error does not match psnode.ErrNodeDead: %s", r, line)
		}
		for _, want := range []string{"worker rank 1", "127.0.0.1:", reason} {
			if !strings.Contains(line, want) {
				t.Errorf("worker %d: the error does not name the dead member (%q): %s", r, want, line)
			}
		}
		later, err := w.expect(ctx, "LATER FAILED")
		if err != nil {
			t.Fatal(err)
		}
		if later != "LATER FAILED same=true" {
			t.Errorf("worker %d: a later collective did not fail with the same error: %s", r, later)
		}
	}
	for _, p := range []*proc{j.sched, j.workers[0], j.workers[2]} {
		if _, err := p.collect(ctx, ""); err != nil {
			t.Error(err)
		}
	}
}
