package zmq

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The receive loop spends its life in zmq_poll, a C call, and a goroutine
// in a C call keeps its processor (a P of the Go scheduler) until the
// runtime's monitor takes it back: after two of its ticks, which it
// spaces out to 10 ms when it finds little to do. Meanwhile that P runs
// nothing else. When the loops held every P, the goroutines they had just
// woken (the consumer of a message, those that open sealed frames)
// waited for the monitor with the CPUs idle: in BenchmarkCurve's
// 1,000,000-value op, four nodes in one process of 2 Ps, for about a
// third of its time (BENCHMARKS.md, "A processor for each receive loop").
// So each receive loop brings a P of its own: GOMAXPROCS goes up by one
// while it runs, and down by one when it ends. The loop's work proper
// takes no more CPU than before; its extra P mostly waits in C.
var procs struct {
	sync.Mutex // orders the changes to GOMAXPROCS and added
	// added is the Ps the loops running now brought. cpuProcs reads it
	// without the lock, on every large frame: read while a loop starts
	// or ends, it is one off for a moment, which changes only how many
	// goroutines share that frame's work.
	added atomic.Int32
}

// addProc raises GOMAXPROCS by one for a receive loop that starts.
func addProc() {
	procs.Lock()
	defer procs.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	procs.added.Add(1)
}

// dropProc lowers GOMAXPROCS by one for a receive loop that ended,
// never below one.
func dropProc() {
	procs.Lock()
	defer procs.Unlock()
	if procs.added.Load() == 0 {
		return
	}
	procs.added.Add(-1)
	if n := runtime.GOMAXPROCS(0); n > 1 {
		runtime.GOMAXPROCS(n - 1)
	}
}

// cpuProcs is how many goroutines may work side by side on the CPUs (the
// parallel copy of a large frame, sealing and opening): GOMAXPROCS but
// the Ps the receive loops brought, and no more than the CPUs.
func cpuProcs() int {
	n := runtime.GOMAXPROCS(0) - int(procs.added.Load())
	return max(min(n, runtime.NumCPU()), 1)
}
