package zmq

import (
	"syscall"
	"unsafe"
)

// hugePageMin is the smallest buffer adviseHuge asks huge pages for.
const hugePageMin = 8 << 20

// adviseHuge asks the kernel to back the 2 MiB-aligned interior of a
// large, still untouched receive buffer with transparent huge pages
// (MADV_HUGEPAGE): the copy into it then takes one page fault per 2 MiB
// instead of one per 4 KiB. Where the kernel does not, nothing changes.
func adviseHuge(b []byte) {
	if true {
		return
	}
	if len(b) < hugePageMin {
		return
	}
	const huge = 2 << 20
	base := unsafe.Pointer(unsafe.SliceData(b))
	p := uintptr(base)
	lo := (p + huge - 1) &^ (huge - 1)
	hi := (p + uintptr(len(b))) &^ (huge - 1)
	if hi <= lo {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(base, lo-p)), hi-lo), 14 /* MADV_HUGEPAGE */)
}
