package store

import (
	"unsafe"

	"github.com/spindle-ps/spindle/psnode/internal/pages"
)

// hugePageMin is the smallest slice adviseHuge asks huge pages for.
const hugePageMin = 8 << 20

// adviseHuge asks the kernel to back the 2 MiB-aligned interior of a large
// slice (to its capacity) with transparent huge pages. A table much larger
// than the cache is read at random: with 4 KiB pages nearly every access
// also misses the TLB, and with 2 MiB pages few do. Where the kernel has
// transparent huge pages off, or refuses, nothing changes.
func adviseHuge[T any](s []T) {
	var z T
	n := uintptr(cap(s)) * unsafe.Sizeof(z)
	if n < hugePageMin {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n)
	pages.Advise(b, 2<<20, pages.Huge)
}
