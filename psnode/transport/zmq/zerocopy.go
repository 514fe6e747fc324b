package zmq

// #include <stdint.h>
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
)

// minBorrowed is the size from which a data frame is sent from the
// caller's memory (sendBorrowed) rather than copied into a buffer libzmq
// allocates. Below it the copy is cheaper than the hand-back (handback.go);
// above it the copy, into freshly mapped pages for large frames, is what a
// send costs.
const minBorrowed = 64 << 10

// releaseBackstop bounds the wait for libzmq to hand back the frames of a
// message whose socket was closed under it. Closing the socket discards
// its queue at once; the backstop only matters if libzmq held on.
const releaseBackstop = 10 * time.Second

// reconnectGrace is how long a message lent to ZeroMQ waits for a broken
// connection to come back before it is dropped (see peer.returned):
// ZeroMQ tries to reconnect every 100 ms, so a peer that is still there
// is back well within it, and one that is gone holds up its sender no
// longer.
const reconnectGrace = time.Second

// borrowed tracks the frames of one message that libzmq reads from Go
// memory. The memory stays pinned until libzmq has released every frame
// and the sender has given up its own reference; done is closed then.
type borrowed struct {
	mu     sync.Mutex
	refs   int // the sender's, plus one per frame libzmq holds
	pinner runtime.Pinner
	handle cgo.Handle // how libzmq names r in spindle_release
	done   chan struct{}
}

func newBorrowed() *borrowed {
	startHandback()
	r := &borrowed{refs: 1, done: make(chan struct{})}
	r.handle = cgo.NewHandle(r)
	return r
}

// lend pins b for libzmq and counts the reference it takes.
func (r *borrowed) lend(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pinner.Pin(&b[0])
	r.refs++
}

// release drops one reference; the last unpins the frames and closes done.
func (r *borrowed) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs--
	if r.refs == 0 {
		r.pinner.Unpin()
		r.handle.Delete()
		close(r.done)
	}
}

// awaitRelease waits, at most releaseBackstop, for libzmq to hand back
// every frame of r after its socket was closed. It reports whether it did;
// if not, the memory stays pinned (r stays reachable through its handle)
// until libzmq lets go.
func (r *borrowed) awaitRelease() bool {
	t := time.NewTimer(releaseBackstop)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
		return false
	}
}

// spindleReleased returns a loan from C: on a Go thread, when libzmq
// refuses a frame, and from libzmq's threads only when the hand-back
// queue cannot take it (handback.go).
//
//export spindleReleased
func spindleReleased(h C.uintptr_t) {
	cgo.Handle(h).Value().(*borrowed).release()
}
