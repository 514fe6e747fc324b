// Package proto holds the Go bindings for the subset of Hadoop's IPC
// messages (RPC headers, SASL, connection context, tokens, delegation-token
// calls, block locations, the data encryption key, the DataNode's SASL
// exchange) that Spindle speaks to the NameNode, the DataNodes and the
// ResourceManager. Edit
// the .proto file and run scripts/gen.sh (or go generate) to regenerate the
// .pb.go file.
package proto

//go:generate sh ../../../scripts/gen.sh
