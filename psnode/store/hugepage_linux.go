package store

import (
	"syscall"
	"unsafe"
)

// hugePageMin is the smallest slice adviseHuge asks huge pages for.
const hugePageMin = 8 << 20

// adviseHuge asks the kernel to back the 2 MiB-aligned interior of a large
// slice with transparent huge pages (MADV_HUGEPAGE). A table much larger
// than the cache is read at random: with 4 KiB pages nearly every access
// also misses the TLB, and with 2 MiB pages few do. Where the kernel has
// transparent huge pages off, or refuses, nothing changes.
func adviseHuge[T any](s []T) {
	var z T
	n := uintptr(cap(s)) * unsafe.Sizeof(z)
	if n < hugePageMin {
		return
	}
	const huge = 2 << 20
	base := unsafe.Pointer(unsafe.SliceData(s))
	p := uintptr(base)
	lo := (p + huge - 1) &^ (huge - 1)
	hi := (p + n) &^ (huge - 1)
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(base, lo-p)), hi-lo), 14 /* MADV_HUGEPAGE */)
}
