package filter

import "unsafe"

// populateMin is the fewest bytes populated maps in one call: below two
// pages, a block may share its pages with memory in use, and the call
// would cost more than the faults it saves.
const populateMin = 8 << 10

// populated returns s after mapping its memory (see populate) when it
// spans populateMin bytes or more.
func populated[T any](s []T) []T {
	var t T
	if n := uintptr(cap(s)) * unsafe.Sizeof(t); n >= populateMin {
		populate(unsafe.Pointer(unsafe.SliceData(s)), n)
	}
	return s
}
