//go:build !linux

// Package pages gives the kernel hints about the pages under Go memory.
package pages

// Advice values for Advise; outside Linux they mean nothing.
const (
	Huge     = 0
	Populate = 0
)

// Advise does nothing outside Linux.
func Advise(b []byte, align uintptr, advice int) {}
