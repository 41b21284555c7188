package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/discovery"
)

// role is one of the demo's five services, the roles of a small tracing
// system.
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
		Use:   "demo [--ttl D] [--heartbeat D]",
		Short: "Monolithic mode: five roles register in one process, find each other, one crashes, one leaves",
		Long: `Run the five roles of a small tracing system (acceptor, writer, router, querier, compactor)
in this process on one catalog handle, and narrate: they register, find each other by capability
from the discovery cache, the writer "crashes" (its heartbeats stop: it expires after its TTL), the
compactor shuts down gracefully (drained, then deregistered), and the writer's row is reaped at 2 × TTL.

It uses the configured catalog (sqlite::memory: is allowed here), so 'switchboard watch' in another
terminal sees the same events. With only --ttl, the heartbeat is min(500ms, ttl/3), at least 10ms
(so --ttl must be at least 20ms). Ctrl-C stops it early and deregisters its instances, the
"crashed" writer's row included, then exits 0.`,
		Example: `  switchboard demo
  switchboard demo --ttl 1s
  switchboard --dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' demo`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Each error names the flag that is wrong: a heartbeat derived
			// from --ttl cannot be, so a --ttl too short for one is a --ttl
			// error ("ttl", which nameSource names as the flag bound to
			// discovery.ttl; the default --ttl is valid, so only a typed one
			// is wrong). --heartbeat is the demo's own, named as it is.
			ttlSet, hbSet := cmd.Flags().Changed("ttl"), cmd.Flags().Changed("heartbeat")
			if ttl <= 0 {
				return usage(g.nameSource(config.Config{}, &switchboard.FieldError{Field: "ttl", Value: ttl.String(), Reason: "must be positive"}))
			}
			if !hbSet {
				hb = max(switchboard.MinHeartbeatInterval, min(hb, ttl/3))
			}
			if err := switchboard.ValidateHeartbeat("--heartbeat", hb, ttl); err != nil {
				return usage(g.nameSource(config.Config{}, err))
			}
			ctx := cmd.Context()
			// --ttl, when given, is the configuration's ttl too, so an
			// error about it names the flag and one about the environment
			// or the file names them.
			c, err := g.readConfig(func(c *config.Config) {
				if ttlSet {
					c.Discovery.TTL = ttl
				}
			})
			if err != nil {
				return err
			}
			if ttl > c.Discovery.MaxTTL {
				// Only --ttl unset gets here: a --ttl above max_ttl failed
				// the configuration's validation already.
				return usage(g.nameSource(c, &switchboard.FieldError{Field: "max_ttl", Value: c.Discovery.MaxTTL.String(),
					Reason: fmt.Sprintf("is below the demo's ttl (%s, the default of --ttl); pass a --ttl of at most %s", ttl, c.Discovery.MaxTTL)}))
			}
			cat, err := g.open(ctx, c, false)
			if err != nil {
				return err
			}
			defer cat.Close()
			err = runDemo(ctx, g, cat, c.Discovery.DSN, ttl, hb)
			if err != nil && ctx.Err() != nil {
				// Interrupted: runDemo's deferred clean-up has deregistered
				// what it registered; Ctrl-C is how a demo is stopped.
				fmt.Fprintln(g.stdout, "\ndemo interrupted")
				return nil
			}
			return err
		},
		Annotations: map[string]string{annEnv: envDSNHelp, annExit: exitLong},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 2*time.Second, "TTL of the demo's instances (at least 20ms, at most max_ttl)")
	cmd.Flags().DurationVar(&hb, "heartbeat", 500*time.Millisecond, "heartbeat interval of the demo's instances (at least 10ms, at most ttl/2; with only --ttl: min(500ms, ttl/3), at least 10ms)")
	bindKey(cmd.Flags(), "ttl", "discovery.ttl") // --heartbeat is the demo's own, not the configuration's
	return cmd
}

// invokedAs is the command as the user ran it, for hints they can paste:
// "go run ./cmd/switchboard" under go run, else argv[0] ("./sb",
// "switchboard").
func invokedAs() string {
	gocache := os.Getenv("GOCACHE")
	if gocache == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			gocache = filepath.Join(dir, "go-build")
		}
	}
	return invokedAsFrom(os.Args[0], gocache)
}

// invokedAsFrom is invokedAs for argv[0] arg0 and the build cache gocache.
// go run builds the binary in a temporary go-build* directory, or (since
// Go 1.24, for some builds) keeps it in the build cache: neither is a path
// the user can type again.
func invokedAsFrom(arg0, gocache string) string {
	const goRun = "go run ./cmd/switchboard"
	if gocache != "" && filepath.IsAbs(arg0) {
		if rel, err := filepath.Rel(gocache, arg0); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return goRun
		}
	}
	for _, part := range strings.Split(filepath.ToSlash(filepath.Dir(arg0)), "/") {
		// os.MkdirTemp's "go-build" followed by digits, or the cache's
		// own "go-build".
		if rest, ok := strings.CutPrefix(part, "go-build"); ok && strings.Trim(rest, "0123456789") == "" {
			return goRun
		}
	}
	return shellQuote(arg0)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	shown := switchboard.RedactDSN(dsn)
	fmt.Fprintf(out, "switchboard demo: catalog %s, ttl %s, heartbeat %s\n", shown, ttl, hb)
	if d, err := switchboard.ParseDSN(dsn); err == nil && d.Memory {
		fmt.Fprintf(out, "(the in-memory catalog lives in this process only; with --dsn sqlite://PATH, `%s watch` in another terminal sees the same stream)\n\n", invokedAs())
	} else {
		fmt.Fprintf(out, "(run `%s watch --dsn %s` in another terminal to see the same stream)\n\n", invokedAs(), shellQuote(shown))
	}
	start := time.Now()

	removed := make(chan switchboard.Event, 16)
	cache, err := discovery.New(ctx, cat, discovery.Options{OnEvent: func(ev switchboard.Event) {
		if ev.Kind == switchboard.EventSynced {
			return
		}
		if ev.Kind == switchboard.EventError {
			fmt.Fprintf(out, "%s  catalog unreachable: %v\n", clock(time.Now(), start, "15:04:05.000"), ev.Err)
			return
		}
		fmt.Fprintln(out, eventLine(ev, time.Now(), start, false))
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
			Version: moduleVersion(), TTL: ttl, Metadata: map[string]string{"demo": "true"}}
		if r.typ == switchboard.TypeWriter {
			// The writer heartbeats by hand so the demo can "kill -9" it:
			// its heartbeats stop and nobody deregisters it.
			stored, err := cat.Register(ctx, in)
			if err != nil {
				return err
			}
			crashID = stored.ID
			// Its row is meant to expire and be reaped (step 5); a demo
			// interrupted before that deletes it, so it leaves nothing in
			// the catalog (deferred before crash, so it runs after the
			// heartbeats stopped).
			defer func() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				if err := cat.Deregister(dctx, stored.ID); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
					g.log.Warn("demo: deregistering the writer failed", "id", stored.ID, "err", err)
				}
			}()
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
	say("   compactor drained (out of rotation at once), then %s after the drain wait", ev.Reason)

	say("5. the others stop; the crashed writer's row is reaped at 2 × ttl")
	var wg sync.WaitGroup
	for _, reg := range regs {
		wg.Go(func() { reg.Close() })
	}
	wg.Wait()
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
