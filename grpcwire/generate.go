package grpcwire

// The Go code in modulepb is generated from module.proto and committed (CI
// does not run protoc). To regenerate after editing module.proto, install
// protoc (Debian: apt-get install -y protobuf-compiler) and the plugins
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest
//
// then run `go generate ./grpcwire` from the repository root.
//go:generate protoc -I . --go_out=modulepb --go_opt=paths=source_relative --go-grpc_out=modulepb --go-grpc_opt=paths=source_relative module.proto
