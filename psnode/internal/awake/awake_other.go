//go:build !linux

package awake

import "time"

var activity *uint64

func start(int, time.Duration) int { return 0 }

func touch(*uint64) {}

func spins() uint64 { return 0 }

func sleeping() bool { return true }
