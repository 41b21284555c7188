package pool

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// TestTLSWinsOverDialOptionsCredentials: Options.TLS always decides the
// transport security of a connection; credentials in DialOptions cannot
// turn it into plaintext (a real mutual TLS handshake happens, the server
// sees the client certificate). Without Options.TLS, credentials given in
// DialOptions are used instead of being silently replaced by plaintext.
func TestTLSWinsOverDialOptionsCredentials(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	srvLeaf, cliLeaf := ca.IssueValid(t, "server"), ca.IssueValid(t, "client")
	addr := startTLS(t, peerSerial, newTLS(t, dir, ca, &srvLeaf, "srv-"))
	cli := newTLS(t, dir, ca, &cliLeaf, "cli-")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"TLS and plaintext dial option", Options{TLS: cli, DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}}},
		{"TLS credentials as a dial option", Options{DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(cli.ClientCredentials())}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, tc.opts)
			p.Register("secure", addr)
			out, err := p.Send(ctx, &router.Message{To: "f.secure.n:in"})
			if err != nil || string(out) != cliLeaf.Serial.String() {
				t.Fatalf("send = %q, %v; want a mutual TLS call (the client certificate's serial %s)", out, err, cliLeaf.Serial)
			}
		})
	}
}

// TestServerTLSWinsOverGRPCOptionsCredentials: a module server with TLS
// set serves TLS even when its raw gRPC options carry credentials of their
// own (plaintext here): a plaintext client is refused, a mutual TLS client
// gets through with its certificate.
func TestServerTLSWinsOverGRPCOptionsCredentials(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	srvLeaf, cliLeaf := ca.IssueValid(t, "server"), ca.IssueValid(t, "client")
	addr := serveWith(t, peerSerial, grpcwire.ServerOptions{TLS: newTLS(t, dir, ca, &srvLeaf, "srv-"),
		GRPCOptions: []grpc.ServerOption{grpc.Creds(insecure.NewCredentials())}})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	plain := newPool(t, Options{})
	plain.Register("secure", addr)
	if out, err := plain.Send(ctx, &router.Message{To: "f.secure.n:in"}); err == nil {
		t.Fatalf("a plaintext client got %q from a server configured for TLS", out)
	}
	secure := newPool(t, Options{TLS: newTLS(t, dir, ca, &cliLeaf, "cli-")})
	secure.Register("secure", addr)
	if out, err := secure.Send(ctx, &router.Message{To: "f.secure.n:in"}); err != nil || string(out) != cliLeaf.Serial.String() {
		t.Fatalf("send = %q, %v; want a mutual TLS call (the client certificate's serial %s)", out, err, cliLeaf.Serial)
	}
}
