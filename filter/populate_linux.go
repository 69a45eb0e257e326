package filter

import (
	"sync/atomic"
	"syscall"
	"unsafe"
)

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE (5.14 and later).
const madvPopulateWrite = 23

// populateOff is set once the kernel has refused madvPopulateWrite.
var populateOff atomic.Bool

// populate asks the kernel to map now, in one call, the pages of the n
// bytes at p that are not mapped yet, without changing their contents.
// The index calls it on the large blocks it allocates and then fills a
// little at a time (list heads, records, places): each page of fresh
// memory would otherwise cost a page fault at its first write, and on
// virtual machines a fault costs far more than mapping the page here
// (12–14 µs against about 0.9 µs per page on the machine of
// bench/README.md). It does nothing where the kernel lacks the call.
// The memory must stay reachable during the call.
func populate(p unsafe.Pointer, n uintptr) {
	if n == 0 || populateOff.Load() {
		return
	}
	const page = 4096 // a multiple of it is enough: the pages are whole
	start := uintptr(p) &^ (page - 1)
	end := (uintptr(p) + n + page - 1) &^ (page - 1)
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite); errno == syscall.EINVAL || errno == syscall.ENOSYS {
		populateOff.Store(true)
	}
}
