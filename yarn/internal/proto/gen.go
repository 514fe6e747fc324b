// Package proto holds the Go bindings for the subset of Hadoop's IPC and
// YARN protobuf messages Spindle speaks. Edit the .proto files and run
// scripts/gen.sh (or go generate) to regenerate the .pb.go files.
package proto

//go:generate sh ../../../scripts/gen.sh
