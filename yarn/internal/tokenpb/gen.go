package tokenpb

// The .proto is registered under its path from the module root, which keeps
// its name unique in the protobuf registry.
//go:generate sh ../../../scripts/gen.sh
