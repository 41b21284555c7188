package natswire

import (
	"context"
	"net"
	"testing"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
)

// TestMixedFleet: one router reaches a module on NATS and a module on gRPC
// through router.Select; the gRPC pool never gets a connection for the NATS
// module.
func TestMixedFleet(t *testing.T) {
	prefix := uniquePrefix()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	onNATS, err := router.New(router.Options{Module: "on-nats", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	onNATS.HandleDefault(func(ctx context.Context, m *router.Message) ([]byte, error) {
		return []byte("nats:" + string(m.Payload)), nil
	})
	listen(t, newWire(t, connect(t, sharedURL), Options{Prefix: prefix}), "on-nats", onNATS.Dispatch)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.ServeEcho(sctx, lis, "on-grpc", grpcwire.ServerOptions{Logger: quiet})
	}()
	t.Cleanup(func() { stop(); waitDone(t, done) })

	p := pool.New(pool.Options{Logger: quiet})
	pctx, pcancel := context.WithCancel(context.Background())
	t.Cleanup(pcancel)
	p.Start(pctx)
	book := map[string][]string{"on-nats": {"nats://" + prefix + ".on-nats.msg"}, "on-grpc": {lis.Addr().String()}}
	for m, addrs := range book {
		p.Register(m, addrs[0])
	}
	sel := &router.Select{NATS: newWire(t, connect(t, sharedURL), Options{Prefix: prefix}), GRPC: p,
		Addresses: func(m string) []string { return book[m] }}
	r, err := router.New(router.Options{Module: "mixed", Wire: sel, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for to, want := range map[string]string{"f.on-nats.n:in": "nats:hi", "f.on-grpc.n:in": "hi"} {
		out, err := r.Send(ctx, &router.Message{To: to, Payload: []byte("hi")})
		if err != nil || string(out) != want {
			t.Fatalf("%s: out=%q err=%v", to, out, err)
		}
	}
	for _, c := range p.Connections() {
		if c != lis.Addr().String() {
			t.Fatalf("the pool holds a connection for %s", c)
		}
	}
}
