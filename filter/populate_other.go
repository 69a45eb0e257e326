//go:build !linux

package filter

import "unsafe"

// populate does nothing on this system (see populate_linux.go).
func populate(p unsafe.Pointer, n uintptr) {}
