// Package proto holds the Go bindings for the subset of YARN's protobuf
// messages Spindle speaks; the IPC messages they build on are in
// internal/hadoop/proto. Edit the .proto files and run scripts/gen.sh (or go
// generate) to regenerate the .pb.go files.
package proto

//go:generate sh ../../../scripts/gen.sh
