package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/natswire"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
	"github.com/switchboard-io/switchboard/tracing"
)

// The NATS wire of the CLI: `switchboard nats` (an embedded broker), and
// echo / send over NATS when [transport] nats_url (TINY_NATS_URL) is set or
// the target module is advertised at nats://….

func newNatsCmd(g *globals) *cobra.Command {
	var listen, dir string
	cmd := &cobra.Command{
		Use:   "nats [--listen 127.0.0.1:4222] [--data DIR]",
		Short: "Run an embedded NATS broker (JetStream on, loopback) for the NATS module wire",
		Long: `Run an embedded NATS broker with JetStream until Ctrl-C, for the NATS module wire: echo, send and
serve use it when TINY_NATS_URL (or [transport] nats_url) points at it. It has no authentication,
so it listens on loopback unless told otherwise. The JetStream store lives beside the SQLite
catalog (or in .data/nats).`,
		Example: `  switchboard nats
  TINY_NATS_URL=nats://127.0.0.1:4222 switchboard echo --name echo`,
		Annotations: map[string]string{annEnv: envDSNHelp + " (places the JetStream store beside a SQLite catalog)", annExit: exitLong},
		Args:        noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.brokerConfig()
			if err != nil {
				return err
			}
			if dir == "" {
				dir = natsDataDir(c)
			}
			s, err := startBroker(g, listen, dir)
			if err != nil {
				return err
			}
			defer s.Shutdown()
			fmt.Fprintf(g.stdout, "switchboard nats: serving %s (JetStream store %s); modules use TINY_NATS_URL=%s\n", s.ClientURL(), dir, s.ClientURL())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4222", "host:port of the broker (loopback unless the network is trusted: it has no authentication)")
	cmd.Flags().StringVar(&dir, "data", "", "JetStream store directory (default: nats/ beside the SQLite catalog, or .data/nats)")
	return cmd
}

// natsDataDir is the broker's store in the data directory: beside the
// SQLite catalog file, else .data/nats.
func natsDataDir(c config.Config) string {
	if d, err := switchboard.ParseDSN(c.Discovery.DSN); err == nil && d.Scheme == "sqlite" && !d.Memory && d.Path != "" {
		return filepath.Join(filepath.Dir(d.Path), "nats")
	}
	return filepath.Join(".data", "nats")
}

// natsWire connects to url with the [nats] credentials and TLS and
// returns the wire of the configured mode, logging which wire the process
// uses and the server it reached. Options that cannot work (a missing
// file) are a usage error before any connection; a failed connection is
// returned as is (callers fall back to gRPC where they can).
func natsWire(g *globals, c config.Config, url string) (*natswire.Wire, error) {
	copts, err := g.natsConnectOptions(c)
	if err != nil {
		return nil, err
	}
	nc, err := natswire.Connect(url, copts)
	if err != nil {
		return nil, err
	}
	mode := natswire.Core
	if c.Transport.NATSJetStream() {
		mode = natswire.JetStream
	}
	w, err := natswire.New(nc, natswire.Options{Mode: mode, Logger: g.log, Replicas: c.NATS.StreamReplicas})
	if err != nil {
		nc.Close()
		return nil, err
	}
	g.log.Info("transport: "+mode.String(), "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
	return w, nil
}

// closeWire closes w and its connection.
func closeWire(w *natswire.Wire) {
	w.Close()
	w.Conn().Close()
}

// echoOverNATS runs `echo` on NATS when a NATS URL is configured: it
// serves tinymodule.<module>.msg and registers nats://tinymodule.<module>.msg.
// handled is false (run the gRPC echo) when NATS is not configured or the
// connection fails at start (the gRPC fallback, logged).
func echoOverNATS(ctx context.Context, g *globals, c config.Config, cat switchboard.Catalog, module string, tp trace.TracerProvider) (handled bool, err error) {
	url := c.Transport.NATSURL
	if url == "" {
		return false, nil
	}
	w, err := natsWire(g, c, url)
	if errors.As(err, new(usageError)) {
		return true, err
	}
	if err != nil {
		g.log.Warn("transport: gRPC fallback (NATS connection failed at start)", "err", err)
		return false, nil
	}
	defer closeWire(w)
	r, err := router.New(router.Options{Module: module, Logger: g.log, TracerProvider: tp})
	if err != nil {
		return true, err
	}
	r.HandleDefault(router.Echo)
	recv, err := w.Listen(module, r.Dispatch)
	if err != nil {
		return true, err
	}
	q := &queueMember{listen: func() (*natswire.Receiver, error) { return w.Listen(module, r.Dispatch) }, recv: recv}
	defer q.close()
	// A drain (by hand, or Close's own on Ctrl-C) takes this replica out
	// of the module's queue group; an undrain puts it back. The drain is
	// followed until Close has deregistered (deferred calls run last to
	// first).
	follow, stopFollow := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFollow()
	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{Name: module, Type: pool.ModuleType,
		Address: natswire.Address(module), Version: moduleVersion(), TTL: c.Discovery.TTL,
		Weight: c.Discovery.Weight, Zone: c.Discovery.Zone},
		switchboard.BootstrapOptions{HeartbeatInterval: c.Discovery.HeartbeatInterval, Logger: g.log, DrainWait: drainWait(c)})
	if err != nil {
		return true, err
	}
	defer reg.Close()
	go followDrain(follow, g, cat, reg.Instance(), q.setDrained)
	line, err := json.Marshal(reg.Instance())
	if err != nil {
		return true, err
	}
	fmt.Fprintf(g.stdout, "%s\n", line)
	g.log.Info("echo: serving", "module", module, "subject", natswire.Subject(module), "catalog", switchboard.RedactDSN(c.Discovery.DSN), "id", reg.Instance().ID)
	<-ctx.Done()
	return true, nil
}

// pickWire marks the wires for router.Select's decision before any
// connection exists.
type pickWire string

func (pickWire) Send(context.Context, *router.Message) ([]byte, error) { return nil, nil }

// sendOverNATS sends over NATS when the target module is advertised at
// nats://… (whatever the local default; without a configured URL it tries
// nats://127.0.0.1:4222), or when it is unknown and a NATS URL is
// configured. target is msg.To as the caller parsed it. handled is false
// when the gRPC pool should carry the message: then nothing was sent and no
// NATS connection was made.
func sendOverNATS(ctx context.Context, g *globals, c config.Config, cat switchboard.Catalog, msg router.Message, target switchboard.NodeName, p router.RetryPolicy, tr *tracing.Tracing, verbose bool) (handled bool, err error) {
	to := msg.To
	insts, err := cat.List(ctx, switchboard.Query{Name: target.Module, Type: pool.ModuleType})
	if err != nil {
		return false, err
	}
	var addrs []string
	for _, in := range insts {
		addrs = append(addrs, in.Address)
	}
	url := c.Transport.NATSURL
	sel := router.Select{NATS: pickWire("nats"), GRPC: pickWire("grpc"), PreferNATS: url != "",
		Addresses: func(string) []string { return addrs }}
	if w, _ := sel.WireFor(target.Module); w != pickWire("nats") {
		return false, nil
	}
	if url == "" {
		url = nats.DefaultURL
		g.log.Info("send: the target is on NATS and no NATS URL is configured; trying the local broker", "url", url)
	}
	w, err := natsWire(g, c, url)
	if errors.As(err, new(usageError)) {
		return true, err
	}
	if err != nil {
		if len(addrs) == 0 {
			g.log.Warn("transport: gRPC fallback (NATS connection failed at start)", "err", err)
			return false, nil
		}
		return true, fmt.Errorf("send to %s: module %q is on NATS (%v) and %w", to, target.Module, addrs, err)
	}
	defer closeWire(w)
	return true, sendVia(ctx, g, msg, p, tr, verbose, func(context.Context, trace.TracerProvider) (router.Wire, func(), error) {
		return w, func() {}, nil
	})
}

// sendVia sends msg through a router over the wire that wire makes (inside
// the send's trace, of tr; done releases it), and prints the reply: what
// `send` does over NATS and over the connection pool.
func sendVia(ctx context.Context, g *globals, msg router.Message, p router.RetryPolicy, tr *tracing.Tracing, verbose bool,
	wire func(ctx context.Context, tp trace.TracerProvider) (w router.Wire, done func(), err error)) error {
	var out []byte
	err := g.traced(ctx, tr, "switchboard send", verbose, func(ctx context.Context, tp trace.TracerProvider) error {
		w, done, err := wire(ctx, tp)
		if err != nil {
			return err
		}
		defer done()
		r, err := router.New(router.Options{Wire: w, Logger: g.log, TracerProvider: tp})
		if err != nil {
			return err
		}
		out, err = r.SendWithPolicy(ctx, &msg, p)
		return err
	})
	if err != nil {
		var re *router.Error
		if errors.As(err, &re) {
			return fmt.Errorf("send to %s failed: %s (code %s, retryable %t)", msg.To, re.Message, re.Code, re.Retryable)
		}
		return fmt.Errorf("send to %s failed: %w", msg.To, err)
	}
	fmt.Fprintf(g.stdout, "%s\n", out)
	return nil
}

// serveNATS starts the embedded broker of `serve --nats` (store in the data
// directory) and, with --demo, two demo modules that talk over it:
// demo-echo answers with the payload, demo-relay forwards to demo-echo. Both
// are registered at their nats:// addresses, so `switchboard send` reaches
// them with nothing installed. stop ends the modules, then the broker.
func serveNATS(ctx context.Context, g *globals, c config.Config, cat switchboard.Catalog, listen string, demo bool) (stop func(), err error) {
	dir := natsDataDir(c)
	b, err := startBroker(g, listen, dir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(g.stdout, "switchboard serve: NATS broker on %s (JetStream store %s)\n", b.ClientURL(), dir)
	if !demo {
		return b.Shutdown, nil
	}
	c.Transport.NATSURL = b.ClientURL()
	c.NATS = config.NATS{StreamReplicas: 1} // the embedded broker: no credentials, no TLS, one server
	w, err := natsWire(g, c, b.ClientURL())
	if err != nil {
		b.Shutdown()
		return nil, err
	}
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		closeWire(w)
		b.Shutdown()
	}
	for _, m := range []struct {
		name string
		h    func(r *router.Router) router.Handler
	}{
		{"demo-echo", func(*router.Router) router.Handler { return router.Echo }},
		{"demo-relay", func(r *router.Router) router.Handler {
			return func(ctx context.Context, msg *router.Message) ([]byte, error) {
				out, err := r.Send(ctx, &router.Message{From: msg.To, To: "demo.demo-echo.echo:in", EdgeID: "demo-relay-echo", Payload: msg.Payload})
				if err != nil {
					return nil, err
				}
				return append([]byte("relayed: "), out...), nil
			}
		}},
	} {
		r, err := router.New(router.Options{Module: m.name, Wire: w, Logger: g.log})
		if err != nil {
			stop()
			return nil, err
		}
		r.HandleDefault(m.h(r))
		recv, err := w.Listen(m.name, r.Dispatch)
		if err != nil {
			stop()
			return nil, err
		}
		closers = append(closers, recv.Close)
		reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{Name: m.name, Type: pool.ModuleType,
			Address: natswire.Address(m.name), Version: moduleVersion(), TTL: c.Discovery.TTL, Metadata: map[string]string{"demo": "true"}},
			switchboard.BootstrapOptions{HeartbeatInterval: c.Discovery.HeartbeatInterval, Logger: g.log})
		if err != nil {
			stop()
			return nil, err
		}
		closers = append(closers, func() { reg.Close() })
	}
	fmt.Fprintf(g.stdout, "switchboard serve: demo modules demo-echo and demo-relay on NATS (try: TINY_NATS_URL=%s switchboard send --to demo.demo-relay.n:in --data hi)\n", b.ClientURL())
	return stop, nil
}

// queueMember is a NATS receiver that leaves its module's queue group
// while the instance is drained (the broker then gives its share to the
// other replicas) and joins again when it is undrained.
type queueMember struct {
	listen func() (*natswire.Receiver, error)
	mu     sync.Mutex
	recv   *natswire.Receiver
	closed bool
}

func (q *queueMember) setDrained(drained bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
	case drained && q.recv != nil:
		q.recv.Close() // in-flight handlers finish first
		q.recv = nil
	case !drained && q.recv == nil:
		r, err := q.listen()
		if err != nil {
			return err
		}
		q.recv = r
	}
	return nil
}

func (q *queueMember) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.recv != nil {
		q.recv.Close()
		q.recv = nil
	}
}

// followDrain watches the instance in and calls set with its draining
// state each time that changes, until ctx ends.
func followDrain(ctx context.Context, g *globals, cat switchboard.Catalog, in switchboard.Instance, set func(drained bool) error) {
	ch, err := cat.Watch(ctx, switchboard.Query{Name: in.Name, All: true})
	if err != nil {
		g.log.Warn("cannot follow the instance's drain state", "id", in.ID, "err", err)
		return
	}
	drained := in.Draining
	for ev := range ch {
		if ev.Instance.ID != in.ID || (ev.Kind != switchboard.EventAdded && ev.Kind != switchboard.EventUpdated) || ev.Instance.Draining == drained {
			continue
		}
		drained = ev.Instance.Draining
		if err := set(drained); err != nil {
			g.log.Warn("rejoining the queue group after an undrain failed", "id", in.ID, "err", err)
			continue
		}
		g.log.Info("queue group membership follows the drain", "id", in.ID, "drained", drained)
	}
}
