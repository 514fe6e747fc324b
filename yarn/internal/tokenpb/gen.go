package tokenpb

// The .proto is registered under its path from the module root, which keeps
// its name unique in the protobuf registry.
//go:generate protoc --proto_path=../../.. --go_out=../../.. --go_opt=paths=source_relative yarn/internal/tokenpb/token.proto
