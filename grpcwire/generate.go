package grpcwire

// The Go code in modulepb is generated from module.proto and committed (CI
// does not run protoc). To regenerate after editing module.proto, install
// protoc (Debian: apt-get install -y protobuf-compiler) and the plugins
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@latest
//
// then run `go generate ./grpcwire` from the repository root. Without
// protoc, `go generate ./...` says so and leaves the committed code as it
// is, so that it still regenerates everything else (the CLI and
// configuration reference in docs/).
//go:generate sh -c "if command -v protoc >/dev/null; then protoc -I . --go_out=modulepb --go_opt=paths=source_relative --go-grpc_out=modulepb --go-grpc_opt=paths=source_relative module.proto; else echo 'grpcwire: protoc is not installed: modulepb left as committed' >&2; fi"
