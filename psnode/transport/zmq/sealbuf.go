package zmq

// #include <stdint.h>
// #include <stdlib.h>
import "C"

import (
	"sync"
	"unsafe"
)

// The memory of sealed frames is reused: a frame freshly allocated by
// libzmq is a fresh mapping for a large message, and faulting its pages in
// while sealing into it cost as much as a fifth of the cipher's time.
// Frames of sealPoolMin bytes or more take their memory from sealPool, in
// classes of sealPoolClass bytes, and libzmq hands it back through
// spindle_pool_free once it has written the frame. The pool keeps at most
// sealPoolMax bytes; memory beyond that is freed.
const (
	sealPoolMin   = 256 << 10
	sealPoolClass = 1 << 20
	sealPoolMax   = 64 << 20
)

var sealPool = &bufPool{free: make(map[uintptr][]unsafe.Pointer)}

// bufPool is a pool of C memory by size class.
type bufPool struct {
	mu    sync.Mutex
	free  map[uintptr][]unsafe.Pointer // by class, in bytes
	bytes int                          // held in free
}

// get returns memory for n bytes and its class; nil when malloc fails.
func (p *bufPool) get(n int) (unsafe.Pointer, uintptr) {
	class := uintptr((n + sealPoolClass - 1) / sealPoolClass * sealPoolClass)
	p.mu.Lock()
	if l := p.free[class]; len(l) > 0 {
		b := l[len(l)-1]
		p.free[class] = l[:len(l)-1]
		p.bytes -= int(class)
		p.mu.Unlock()
		return b, class
	}
	p.mu.Unlock()
	return C.malloc(C.size_t(class)), class
}

// put returns memory of class to the pool, or frees it when the pool is
// full.
func (p *bufPool) put(b unsafe.Pointer, class uintptr) {
	p.mu.Lock()
	if p.bytes+int(class) <= sealPoolMax {
		p.free[class] = append(p.free[class], b)
		p.bytes += int(class)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	C.free(b)
}

//export spindlePooled
func spindlePooled(data unsafe.Pointer, class C.uintptr_t) {
	sealPool.put(data, uintptr(class))
}
