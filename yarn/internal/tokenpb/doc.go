// Package tokenpb decodes the identifiers inside YARN security tokens.
//
// A Hadoop token's identifier bytes are a serialised protobuf whose type
// depends on the token kind: AMRMTokenIdentifierProto for
// "YARN_AM_RM_TOKEN", NMTokenIdentifierProto for "NMToken",
// ContainerTokenIdentifierProto for "ContainerToken". Authentication never
// needs them decoded (DIGEST-MD5 uses the raw bytes), but the user a TOKEN
// connection runs as is derived from them, and they are useful in logs.
//
// token.proto is a subset of Hadoop's messages under the package
// spindle.yarn.token; token.pb.go is generated from it (see gen.go).
package tokenpb
