// Package modulepb holds the Go code generated from ../module.proto: the
// messages and the ModuleService client and server of the gRPC module wire.
// Do not edit the generated files; see grpcwire/generate.go to regenerate.
package modulepb
