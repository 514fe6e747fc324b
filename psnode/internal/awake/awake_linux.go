//go:build linux

package awake

// #include "awake.h"
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

var (
	activity *uint64 // in C memory, read by the spinners
	asleep   *uint32
)

func start(threads int, window time.Duration) int {
	n := int(C.spindle_awake_start(C.int(threads), C.uint64_t(window)))
	if n > 0 {
		asleep = (*uint32)(unsafe.Pointer(C.spindle_awake_asleep_word()))
		activity = (*uint64)(unsafe.Pointer(C.spindle_awake_activity()))
	}
	return n
}

func touch(a *uint64) {
	atomic.AddUint64(a, 1)
	if atomic.LoadUint32(asleep) != 0 {
		C.spindle_awake_wake()
	}
}

func spins() uint64 { return uint64(C.spindle_awake_spins()) }

func sleeping() bool { return C.spindle_awake_sleeping() != 0 }
