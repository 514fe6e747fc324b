// Package pages gives the kernel hints about the pages under Go memory.
package pages

import (
	"syscall"
	"unsafe"
)

// Advice values for Advise, from Linux's madvise(2).
const (
	Huge     = 14 // MADV_HUGEPAGE: back the range with transparent huge pages
	Populate = 23 // MADV_POPULATE_WRITE (Linux 5.14): fault the pages in now, writable
)

// Advise gives advice for the part of b that starts and ends on multiples
// of align (a power of two: 4 KiB pages, 2 MiB huge pages); nothing when
// that part is empty. It is a hint: an error (an older kernel, huge pages
// off) changes nothing, and is not reported.
func Advise(b []byte, align uintptr, advice int) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + align - 1) &^ (align - 1)
	hi := (start + uintptr(len(b))) &^ (align - 1)
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(b[lo-start:hi-start], advice)
}
