package pool_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// echoModule serves module as an echo module on loopback until the test
// ends and returns its address.
func echoModule(t *testing.T, module string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.ServeEcho(ctx, lis, module, grpcwire.ServerOptions{Logger: quiet, GracePeriod: time.Second})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return lis.Addr().String()
}

// TestSendThroughSQLiteCatalog: the whole path of `switchboard send` —
// instances registered in a real SQLite catalog, a pool following it, a
// router on top — including a deregistration seen through the watch, and
// the pool's log lines.
func TestSendThroughSQLiteCatalog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "c.db"), switchboard.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	addr := echoModule(t, "echo-mod")
	if _, err := cat.Register(ctx, switchboard.Instance{ID: "e1", Name: "echo-mod", Type: "module", Address: addr, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Register(ctx, switchboard.Instance{ID: "n1", Name: "nats-mod", Type: "module", Address: "nats://tinymodule.nats-mod.msg", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	// A service that does not serve the module wire: Connect neither
	// registers nor dials it.
	other := testkit.Listen(t)
	t.Cleanup(func() { other.Close() })
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := cat.Register(ctx, switchboard.Instance{ID: "q1", Name: "querier", Type: "querier", Address: other.Addr().String(), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	var logs testkit.SyncBuffer
	runCtx, stop := context.WithCancel(ctx)
	p, err := pool.Connect(runCtx, cat, pool.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(router.Options{Wire: p, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if mods := p.Modules(); len(mods) != 2 || mods["querier"] != nil {
		t.Fatalf("Connect follows %v; want only the two modules", mods)
	}
	if conns := p.Connections(); len(conns) != 1 || conns[0] != addr {
		t.Fatalf("connections %v, want only %s", conns, addr)
	}
	// Connect returned after the snapshot: the first send already works.
	out, err := r.Send(ctx, &router.Message{To: "flow.echo-mod.node:in", Payload: []byte("hello")})
	if err != nil || string(out) != "hello" {
		t.Fatalf("send: %q %v", out, err)
	}
	_, err = r.Send(ctx, &router.Message{To: "flow.nats-mod.node:in"})
	var e *router.Error
	if !errors.As(err, &e) || e.Code != router.CodeNotDialable {
		t.Fatalf("nats module: %v", err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "address pool: connection pre-warmed") {
		if time.Now().After(deadline) {
			t.Fatalf("no pre-warm log line; logs:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cat.Deregister(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err := r.Send(ctx, &router.Message{To: "flow.echo-mod.node:in"})
		if errors.As(err, &e) && e.Code == router.CodeModuleUnknown {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deregistration never reached the pool: last %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := other.Accepted.Load(); n != 0 {
		t.Fatalf("the pool connected %d times to a service that is not a module", n)
	}
	stop()
	deadline = time.Now().Add(30 * time.Second)
	for len(p.Connections()) != 0 || !strings.Contains(logs.String(), "address pool: closing connection") {
		if time.Now().After(deadline) {
			t.Fatalf("pool not closed; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, line := range []string{
		`msg="address pool: registering module" module=echo-mod addr=` + addr,
		`msg="address pool: connection pre-warmed" module=echo-mod addr=` + addr,
		`msg="address pool: deregistering module" module=echo-mod`,
		`msg="address pool: closing connection" module=echo-mod addr=` + addr,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("missing log line %s in:\n%s", line, logs.String())
		}
	}
}
