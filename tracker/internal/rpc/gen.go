// Package rpc holds the Thrift IDL of the tracker RPC and, in trackerrpc,
// the Go code generated from it. Only package tracker uses them.
package rpc

//go:generate sh ../../../scripts/gen.sh
