package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// role is one of the catalog seed's five services.
type role struct {
	typ  string
	addr string
	caps []string
}

var demoRoles = []role{
	{switchboard.TypeAcceptor, "127.0.0.1:4317", []string{switchboard.CapTraceIngestion}},
	{switchboard.TypeWriter, "127.0.0.1:50051", []string{switchboard.CapTraceIngestion, switchboard.CapStorage}},
	{switchboard.TypeRouter, "127.0.0.1:50053", []string{switchboard.CapRouting}},
	{switchboard.TypeQuerier, "127.0.0.1:50054", []string{switchboard.CapQueryExecution}},
	{switchboard.TypeCompactor, "127.0.0.1:50055", []string{switchboard.CapStorageMaintenance}},
}

func newDemoCmd(g *globals) *cobra.Command {
	var ttl, hb time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Monolithic mode: five roles register in one process, find each other, one crashes, one leaves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl <= 0 || hb <= 0 || hb >= ttl {
				return usage(fmt.Errorf("--heartbeat (%s) must be positive and shorter than --ttl (%s)", hb, ttl))
			}
			ctx := cmd.Context()
			c, cat, err := g.catalog(ctx, false)
			if err != nil {
				return err
			}
			defer cat.Close()
			return runDemo(ctx, g, cat, c.Discovery.DSN, ttl, hb)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 2*time.Second, "TTL of the demo's instances")
	cmd.Flags().DurationVar(&hb, "heartbeat", 500*time.Millisecond, "heartbeat interval of the demo's instances")
	return cmd
}

// lockedWriter serialises the demo's narration and the cache's event lines,
// which come from two goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func runDemo(ctx context.Context, g *globals, cat switchboard.Catalog, dsn string, ttl, hb time.Duration) error {
	out := &lockedWriter{w: g.stdout}
	say := func(format string, a ...any) { fmt.Fprintf(out, "      "+format+"\n", a...) }
	fmt.Fprintf(out, "switchboard demo: catalog %s, ttl %s, heartbeat %s\n", dsn, ttl, hb)
	fmt.Fprintf(out, "(run `switchboard watch --dsn %s` in another terminal to see the same stream)\n\n", dsn)

	removed := make(chan switchboard.Event, 16)
	cache, err := discovery.New(ctx, cat, discovery.Options{OnEvent: func(ev switchboard.Event) {
		if ev.Kind == switchboard.EventSynced {
			return
		}
		if ev.Kind == switchboard.EventError {
			fmt.Fprintf(out, "%s  catalog unreachable: %v\n", time.Now().Format("15:04:05.000"), ev.Err)
			return
		}
		fmt.Fprintln(out, eventLine(ev))
		if ev.Kind == switchboard.EventRemoved {
			select {
			case removed <- ev:
			default: // not one of ours, or nobody waiting
			}
		}
	}})
	if err != nil {
		return err
	}
	defer cache.Close()

	say("1. five roles register (one catalog handle, heartbeats batched)")
	regs := map[string]*switchboard.Registration{}
	var crashID string
	stopBeat := make(chan struct{})
	beatDone := make(chan struct{})
	// crash stops the writer's heartbeats; deferred too, so an early return
	// leaves no goroutine heartbeating on a closed catalog.
	crash := sync.OnceFunc(func() {
		close(stopBeat)
		<-beatDone
	})
	for _, r := range demoRoles {
		in := switchboard.Instance{Name: "demo-" + r.typ, Type: r.typ, Address: r.addr, Capabilities: r.caps,
			Version: version, TTL: ttl, Metadata: map[string]string{"demo": "true"}}
		if r.typ == switchboard.TypeWriter {
			// The writer heartbeats by hand so the demo can "kill -9" it:
			// its heartbeats stop and nobody deregisters it.
			stored, err := cat.Register(ctx, in)
			if err != nil {
				return err
			}
			crashID = stored.ID
			go func() {
				defer close(beatDone)
				t := time.NewTicker(hb)
				defer t.Stop()
				for {
					select {
					case <-stopBeat:
						return
					case <-t.C:
						cat.Heartbeat(ctx, stored.ID)
					}
				}
			}()
			defer crash()
			continue
		}
		reg, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: hb, Logger: g.log})
		if err != nil {
			return err
		}
		regs[r.typ] = reg
		defer reg.Close()
	}
	ids := []string{crashID}
	for _, reg := range regs {
		ids = append(ids, reg.ID())
	}
	if err := waitFor(ctx, func() bool {
		for _, id := range ids {
			if _, ok := cache.Get(id); !ok {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}

	say("2. they find each other by capability, from the cache (no query per lookup)")
	for _, find := range []struct{ who, cap string }{
		{"router", switchboard.CapQueryExecution}, {"acceptor", switchboard.CapStorage},
		{"querier", switchboard.CapStorage}, {"compactor", switchboard.CapStorage},
	} {
		in, ok := cache.PickRoundRobin(find.cap)
		if !ok {
			return fmt.Errorf("demo: no instance with capability %s", find.cap)
		}
		say("   %-9s -> %-19s = %s at %s", find.who, find.cap, in.Name, in.Address)
	}
	n := len(cache.ByCapability(switchboard.CapTraceIngestion))
	say("   %d instances can ingest traces", n)

	say("3. the writer is killed: its heartbeats stop, nobody deregisters it")
	crash()
	killed := time.Now()
	ev, err := waitRemoved(ctx, removed, crashID)
	if err != nil {
		return err
	}
	say("   writer %s after %s (ttl %s)", ev.Reason, time.Since(killed).Round(time.Millisecond), ttl)
	if _, ok := cache.PickRoundRobin(switchboard.CapStorage); ok {
		return fmt.Errorf("demo: the dead writer is still offered for storage")
	}
	say("   storage lookups now find nobody: %d instances", len(cache.ByCapability(switchboard.CapStorage)))

	say("4. the compactor shuts down gracefully")
	compactor := regs[switchboard.TypeCompactor]
	if err := compactor.Close(); err != nil {
		return err
	}
	ev, err = waitRemoved(ctx, removed, compactor.ID())
	if err != nil {
		return err
	}
	say("   compactor %s at once", ev.Reason)

	say("5. the others stop; the crashed writer's row is reaped at 2 × ttl")
	for _, reg := range regs {
		reg.Close()
	}
	select {
	case <-time.After(time.Until(killed.Add(2 * ttl))):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := waitFor(ctx, func() bool {
		cat.Reap(ctx, 0)
		_, err := cat.Get(ctx, crashID)
		return errors.Is(err, switchboard.ErrNotFound)
	}); err != nil {
		return err
	}
	say("   writer row reaped %s after the crash", time.Since(killed).Round(time.Millisecond))
	fmt.Fprintln(out, "\ndemo done: every instance registered, was found, crashed or left, and disappeared.")
	return nil
}

func waitRemoved(ctx context.Context, removed <-chan switchboard.Event, id string) (switchboard.Event, error) {
	for {
		select {
		case ev := <-removed:
			if ev.Instance.ID == id {
				return ev, nil
			}
		case <-ctx.Done():
			return switchboard.Event{}, ctx.Err()
		}
	}
}

func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
