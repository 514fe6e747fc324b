//go:build !linux

package zmq

func adviseHuge(b []byte) {}
