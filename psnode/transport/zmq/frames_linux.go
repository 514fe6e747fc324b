package zmq

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE (5.14 and later).
const madvPopulateWrite = 23

// populate faults in the pages under b in one madvise call, ahead of a
// copy into it. It is a hint: an error (an older kernel) changes nothing,
// the copy then faults the pages in itself.
func populate(b []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	const page = 4 << 10
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(b[lo-start:hi-start], madvPopulateWrite)
}
