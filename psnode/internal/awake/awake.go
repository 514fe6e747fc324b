// Package awake keeps this machine's processors from going idle while
// the process is exchanging messages, so that a message's receiver wakes
// in microseconds rather than in the tens of microseconds a processor in
// its idle state can take to resume (in virtual machines above all, where
// an idle processor is descheduled by the hypervisor).
//
// Start starts spinner threads of the lowest scheduling class Linux has
// (SCHED_IDLE): they run only on a processor that has nothing else to
// run and give way at once to any thread that wakes there. They spin
// while Touch was called within the window before, and sleep otherwise,
// costing nothing while the process is quiet. Busy polling of this kind
// is what MPI libraries and kernel-bypass stacks do by default; it turns
// processor time nobody wanted into shorter waits, and shows as CPU time
// of the process. It is not free: a processor that never rests may be
// run less by a hypervisor, and where one process keeps both processors
// busy the spinners cost it a tenth of its speed (BENCHMARKS.md).
//
// On systems other than Linux Start starts nothing and Touch does nothing.
package awake

import (
	"sync"
	"sync/atomic"
	"time"
)

// Window is how long the spinners go on after the last Touch.
const Window = 2 * time.Millisecond

var (
	once    sync.Once
	started atomic.Int32
	act     atomic.Pointer[uint64]
)

// Start starts threads spinners for the whole process, once: later calls
// do nothing. It returns the number of spinners running.
func Start(threads int) int {
	once.Do(func() {
		if threads < 1 {
			return
		}
		n := start(threads, Window)
		started.Store(int32(n))
		if n > 0 {
			act.Store(activity)
		}
	})
	return int(started.Load())
}

// Touch tells the spinners that the process is exchanging messages.
func Touch() {
	if a := act.Load(); a != nil {
		touch(a)
	}
}

// Spins counts rounds of the spinners' loop (in 64s) since they started:
// it grows while they spin and stands still while they sleep.
func Spins() uint64 {
	if act.Load() == nil {
		return 0
	}
	return spins()
}
