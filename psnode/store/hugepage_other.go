//go:build !linux

package store

func adviseHuge[T any](s []T) {}
