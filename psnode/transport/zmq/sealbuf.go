package zmq

// #include <stddef.h>
// #include <stdint.h>
// void spindle_pool_init(size_t max);
// void *spindle_pool_get(size_t class);
// void spindle_pool_put(void *data, size_t class);
// size_t spindle_pool_held(void);
import "C"

import "unsafe"

// The memory of sealed frames is reused: a frame freshly allocated by
// libzmq is a fresh mapping for a large message, and faulting its pages in
// while sealing into it cost as much as a fifth of the cipher's time.
// Frames of sealPoolMin bytes or more take their memory from a pool, in
// classes of sealPoolClass bytes, and libzmq hands it back through
// spindle_pool_free once it has written the frame. The pool keeps at most
// sealPoolMax bytes; memory beyond that is freed. It lives in C
// (handback.go), so that libzmq's thread hands memory back without
// calling into Go.
const (
	sealPoolMin   = 256 << 10
	sealPoolClass = 1 << 20
	sealPoolMax   = 64 << 20
)

func init() { C.spindle_pool_init(C.size_t(sealPoolMax)) }

// poolGet returns memory for n bytes and its class; nil when malloc fails.
func poolGet(n int) (unsafe.Pointer, uintptr) {
	class := uintptr((n + sealPoolClass - 1) / sealPoolClass * sealPoolClass)
	return C.spindle_pool_get(C.size_t(class)), class
}

// poolPut returns memory of class to the pool, or frees it when the pool
// is full.
func poolPut(b unsafe.Pointer, class uintptr) {
	C.spindle_pool_put(b, C.size_t(class))
}

// poolHeld is the number of bytes the pool holds.
func poolHeld() int {
	return int(C.spindle_pool_held())
}
