package local

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
)

// CPUBind says whether a local job's servers and workers are each bound
// to one CPU.
//
// A psnode task hands every message between threads: its own, libzmq's
// I/O thread, and those of the processes it talks to. When a machine's
// CPUs are all busy with a job's tasks, each such hand-off may wake a
// thread on another CPU; with each process held to one CPU, and worker r
// beside server r, more of them stay on one. That makes a 2 × 2 job on 2
// CPUs faster, and a 1 × 1 job on 2 CPUs slower (BENCHMARKS.md, "Each task
// on one CPU"), hence CPUBindAuto's rule. A bound task is given
// GOMAXPROCS=2 unless its environment sets one: faster, measured, than
// the 1 Go picks for one CPU. Its transport adds a P for its receive
// loop (psnode/transport/zmq, procs.go); GOMAXPROCS=1, which that makes
// 2, ran no faster than 2 made 3 (four rounds of scripts/bench-train.sh).
type CPUBind int

const (
	// CPUBindAuto binds a psnode job's servers and workers when every
	// CPU this process may run on gets as many servers as the others, and
	// as many workers, and at least one of each: when the numbers of
	// servers and of workers are both multiples of the CPUs'. It decides
	// once, on the numbers the job starts with: servers and workers that
	// ps-submit scale adds later are bound by their rank all the same.
	CPUBindAuto CPUBind = iota
	// CPUBindNone binds nothing.
	CPUBindNone
	// CPUBindCores binds every server and worker, whatever their number.
	CPUBindCores
)

var cpuBindNames = []string{CPUBindAuto: "auto", CPUBindNone: "none", CPUBindCores: "cores"}

func (b CPUBind) String() string {
	if b < 0 || int(b) >= len(cpuBindNames) {
		return fmt.Sprintf("CPUBind(%d)", int(b))
	}
	return cpuBindNames[b]
}

// ParseCPUBind reads "auto", "none" or "cores".
func ParseCPUBind(s string) (CPUBind, error) {
	for b, name := range cpuBindNames {
		if s == name {
			return CPUBind(b), nil
		}
	}
	return 0, fmt.Errorf("want %s", strings.Join(cpuBindNames, ", "))
}

// bindGOMAXPROCS is the GOMAXPROCS a bound task gets when its environment
// does not set one.
const bindGOMAXPROCS = "2"

// bindCPUs returns the CPUs a job's servers and workers are bound to
// under b, cpus being those this process may run on; nil means none is
// bound.
func bindCPUs(b CPUBind, spec job.JobSpec, cpus []int) []int {
	switch {
	case len(cpus) == 0, b == CPUBindNone:
		return nil
	case b == CPUBindAuto && (spec.NumServers == 0 || spec.NumServers%len(cpus) != 0 || spec.NumWorkers%len(cpus) != 0):
		return nil
	}
	return cpus
}

// jobCPUs returns the CPUs spec's servers and workers are bound to under
// b (bindCPUs); nil means none is bound. With CPUBindNone it asks the
// kernel nothing, so that its failure cannot matter.
func jobCPUs(spec job.JobSpec, b CPUBind) ([]int, error) {
	if b == CPUBindNone {
		return nil, nil
	}
	own, err := ownCPUs()
	if err != nil {
		return nil, err
	}
	return bindCPUs(b, spec, own), nil
}

// ownCPUs lists the CPUs this process may run on.
func ownCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("local: the CPUs this process may use: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// cpuOf is the CPU of cpus that task t is bound to: a server's or a
// worker's of rank r is cpus[r mod len(cpus)], so that server r and
// worker r share one. The scheduler, idle but for control messages, is
// not bound.
func cpuOf(cpus []int, t job.Task) (int, bool) {
	if len(cpus) == 0 || (t.Role != conf.RoleServer && t.Role != conf.RoleWorker) {
		return 0, false
	}
	return cpus[t.Rank%len(cpus)], true
}

// startOn starts cmd bound to cpu. A child takes the CPU mask of the
// thread that forks it, so the calling goroutine, locked to its thread,
// gives that thread the one CPU for the fork and its own mask back after.
// (A thread of its own, ended after, would not do: a child with
// Pdeathsig dies with the thread that started it.) The runtime starts no
// thread from a locked one, so no other thread takes the mask.
func startOn(cmd *exec.Cmd, cpu int, log *logrus.Entry) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var own, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		return fmt.Errorf("CPU mask: %w", err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return fmt.Errorf("bind to CPU %d: %w", cpu, err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &own); rerr != nil {
		// This thread keeps the one CPU, which costs only speed; the
		// child runs as it should.
		log.WithError(rerr).Warnf("a thread of this process stays on CPU %d", cpu)
	}
	return err
}
