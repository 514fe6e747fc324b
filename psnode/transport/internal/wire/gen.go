// Package wire holds the Thrift schema of the psnode meta frame and the Go
// code generated from it. Only psnode/transport uses it.
package wire

//go:generate sh ../../../../scripts/gen.sh
//go:generate gofmt -w GoUnusedProtection__.go meta-consts.go meta.go
