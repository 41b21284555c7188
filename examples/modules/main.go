// Command modules runs two modules that exchange messages by node name over
// the gRPC wire: "ping" sends to the node demo.pong.upper, whose handler
// answers in capitals and, before it does, sends a note back to
// demo.ping.log. Each module serves the module wire on a free port and
// registers its address in the catalog; the address pool follows the
// catalog, so the routers find each other by module name alone.
//
//	go run ./examples/modules [-dsn sqlite://.data/switchboard.db]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/pool"
	_ "github.com/switchboard-io/switchboard/postgres" // postgres:// DSNs
	_ "github.com/switchboard-io/switchboard/remote"   // http:// DSNs: a switchboard serve
	"github.com/switchboard-io/switchboard/router"
	_ "github.com/switchboard-io/switchboard/sqlite" // sqlite:// DSNs, the default
)

func main() {
	dsn := flag.String("dsn", switchboard.DefaultDSN, "catalog DSN")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "modules:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn string, out io.Writer) error {
	quiet := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: quiet})
	if err != nil {
		return err
	}
	defer cat.Close()

	// One pool for the process: a connection per address, shared by every
	// router that sends through it. It follows the catalog's modules, so
	// it learns of the two below as they register.
	pl, err := pool.Connect(ctx, cat, pool.Options{Logger: quiet})
	if err != nil {
		return err
	}
	defer pl.Close()

	var mu sync.Mutex // out is written from handlers
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", a...)
	}

	ping, err := router.New(router.Options{Module: "ping", Wire: pl, Logger: quiet})
	if err != nil {
		return err
	}
	ping.Handle("log", func(_ context.Context, m *router.Message) ([]byte, error) {
		say("ping: node log got %q (from %s, depth %d)", m.Payload, m.From, m.Depth)
		return nil, nil
	})
	pong, err := router.New(router.Options{Module: "pong", Wire: pl, Logger: quiet})
	if err != nil {
		return err
	}
	pong.Handle("upper", func(ctx context.Context, m *router.Message) ([]byte, error) {
		// A send from inside a handler is one hop deeper.
		if _, err := pong.Send(ctx, &router.Message{From: "demo.pong.upper:out", To: "demo.ping.log:in", Payload: []byte("pong got " + string(m.Payload))}); err != nil {
			return nil, err
		}
		return []byte(strings.ToUpper(string(m.Payload))), nil
	})

	var wg sync.WaitGroup
	defer wg.Wait() // the servers stop when ctx is cancelled, before this returns
	defer cancel()
	for _, r := range []*router.Router{ping, pong} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			grpcwire.Serve(ctx, ln, r.Dispatch, grpcwire.ServerOptions{Logger: quiet})
		}()
		reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{
			Name:    r.Module(),
			Type:    pool.ModuleType, // what the pool follows
			Address: ln.Addr().String(),
		}, switchboard.BootstrapOptions{Logger: quiet})
		if err != nil {
			return err
		}
		defer reg.Close()
		say("%s: serving on %s", r.Module(), ln.Addr())
	}

	// The pool may not have seen pong's registration yet: an unknown
	// module is a retryable failure, so a policy of a few attempts covers
	// the moment the catalog takes to push it.
	retry := router.RetryPolicy{MaxAttempts: 5, InitialDelay: 100 * time.Millisecond}
	res, err := ping.SendWithPolicy(ctx, &router.Message{From: "demo.ping.start:out", To: "demo.pong.upper:in", Payload: []byte("hello")}, retry)
	if err != nil {
		return err
	}
	say("ping: pong answered %q", res)
	return nil
}
