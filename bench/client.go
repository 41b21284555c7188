package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
	_ "github.com/switchboard-io/switchboard/postgres" // postgres:// DSNs
	_ "github.com/switchboard-io/switchboard/remote"   // http:// DSNs (switchboard serve)
	_ "github.com/switchboard-io/switchboard/sqlite"   // sqlite:// DSNs
)

// store says how a process reaches one system under measurement.
type store struct {
	Kind   string // "etcd", "switchboard" or "floor"
	DSN    string // switchboard: the catalog DSN; etcd: the client URL
	Prefix string // etcd: the key prefix of this measurement
}

// client is what every measurement does with a store, the same shape on
// etcd and on Switchboard. A client belongs to one process.
type client interface {
	// register stores a new entry of name (round i), stamped with sent
	// (Unix ns), and returns its id.
	register(ctx context.Context, name string, i int64, sent int64) (string, error)
	// heartbeat renews the entry (Switchboard: Heartbeat of its id; etcd:
	// one keep-alive of the process's lease).
	heartbeat(ctx context.Context, id string) error
	// deregister deletes the entry.
	deregister(ctx context.Context, id string) error
	// watch starts a watch of every entry and returns once it is
	// established (Switchboard: synced; etcd: created); fn gets the sent
	// stamp of every entry added after that, on the watch's goroutine.
	watch(ctx context.Context, fn func(sent int64)) error
	// hold registers n entries of name and keeps them alive every second
	// until ctx ends; stats reads its counters. reaper: Switchboard's
	// Bootstrap runs this process's reaper (its default).
	hold(ctx context.Context, name string, n int, reaper bool) (stats func() holdStats, err error)
	// live counts the entries of the store that are alive now.
	live(ctx context.Context) (int, error)
	close() error
}

// holdStats counts what a process's keep-alive did.
type holdStats struct {
	Renewals int64 // heartbeat calls / keep-alive responses that succeeded
	Failures int64 // renewals that failed, leases lost
	Reregs   int64 // Switchboard: registrations found gone and written again
}

func dial(ctx context.Context, st store) (client, error) {
	switch st.Kind {
	case "switchboard":
		cat, err := switchboard.Open(ctx, st.DSN, switchboard.Options{Logger: quiet})
		if err != nil {
			return nil, err
		}
		return &sbClient{cat: cat}, nil
	case "etcd":
		return dialEtcd(ctx, st)
	case "floor":
		tr := http.DefaultTransport.(*http.Transport).Clone()
		return &floorClient{url: st.DSN, http: &http.Client{Transport: tr}}, nil
	}
	return nil, fmt.Errorf("unknown store kind %q", st.Kind)
}

// quiet is the logger of the catalog handles and registrations: nothing,
// or with SWITCHBOARD_BENCH_LOG=1 their warnings on stderr, which the
// harness then passes on as they come (otherwise a child's stderr is shown
// only when it fails).
var quiet = func() *slog.Logger {
	if os.Getenv("SWITCHBOARD_BENCH_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}()

// Entries carry what a small service registers: a name, a type, an
// address, two capabilities and two metadata values, one of them the
// writer's clock.
const (
	entryType = switchboard.TypeWriter
	fleetTTL  = 5 * time.Second // Switchboard: 1 s heartbeats, at most half the TTL
)

func address(i int64) string {
	return fmt.Sprintf("10.%d.%d.%d:%d", i>>24&255, i>>16&255, i>>8&255, 1024+i&0x7fff)
}

func entry(name string, i int64, sent int64) switchboard.Instance {
	return switchboard.Instance{
		Name:         name,
		Type:         entryType,
		Address:      address(i),
		Capabilities: []string{switchboard.CapStorage, switchboard.CapQueryExecution},
		Version:      "1.0.0",
		Metadata:     map[string]string{"zone": "zone-a", "sent": strconv.FormatInt(sent, 10)},
	}
}

// sbClient is a Switchboard catalog handle, used through the public API
// only (switchboard.Open, Register, Heartbeat, Deregister, Watch, List,
// Bootstrap).
type sbClient struct {
	cat switchboard.Catalog
}

func (c *sbClient) register(ctx context.Context, name string, i int64, sent int64) (string, error) {
	in, err := c.cat.Register(ctx, entry(name, i, sent))
	return in.ID, err
}

func (c *sbClient) heartbeat(ctx context.Context, id string) error {
	missing, err := c.cat.Heartbeat(ctx, id)
	if err == nil && len(missing) > 0 {
		err = fmt.Errorf("heartbeat: %s missing", id)
	}
	return err
}

func (c *sbClient) deregister(ctx context.Context, id string) error {
	return c.cat.Deregister(ctx, id)
}

func (c *sbClient) watch(ctx context.Context, fn func(sent int64)) error {
	ch, err := c.cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		return err
	}
	for ev := range ch {
		if ev.Kind == switchboard.EventSynced {
			break
		}
		if ev.Kind == switchboard.EventError {
			return ev.Err
		}
	}
	go func() {
		for ev := range ch {
			if ev.Kind != switchboard.EventAdded {
				continue
			}
			if sent, err := strconv.ParseInt(ev.Instance.Metadata["sent"], 10, 64); err == nil {
				fn(sent)
			}
		}
	}()
	return nil
}

func (c *sbClient) hold(ctx context.Context, name string, n int, reaper bool) (func() holdStats, error) {
	regs := make([]*switchboard.Registration, 0, n)
	var setup int64
	for i := range n {
		in := entry(name, int64(i), 0)
		in.TTL = fleetTTL
		err := retry(ctx, &setup, func() error {
			r, err := switchboard.Bootstrap(ctx, c.cat, in, switchboard.BootstrapOptions{HeartbeatInterval: time.Second, DisableReaper: !reaper, Logger: quiet})
			if err == nil {
				regs = append(regs, r)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return func() holdStats {
		s := holdStats{Failures: setup}
		for _, r := range regs {
			st := r.Stats()
			s.Renewals += st.Heartbeats
			s.Failures += st.Failures
			s.Reregs += st.Reregistrations
		}
		return s
	}, nil
}

func (c *sbClient) live(ctx context.Context) (int, error) {
	list, err := c.cat.List(ctx, switchboard.Query{})
	return len(list), err
}

func (c *sbClient) close() error { return c.cat.Close() }

// counter is a mutex-guarded list of latencies.
type counter struct {
	mu  sync.Mutex
	lat []float64 // ms
}

func (c *counter) add(sent int64) {
	d := time.Since(time.Unix(0, sent))
	c.mu.Lock()
	c.lat = append(c.lat, float64(d.Microseconds())/1000)
	c.mu.Unlock()
}

func (c *counter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lat)
}

// retry runs f until it succeeds, at most 10 times a second apart, as a
// service retries its registration at start; each failure counts in
// *failures.
func retry(ctx context.Context, failures *int64, f func() error) error {
	var err error
	for range 10 {
		if err = f(); err == nil {
			return nil
		}
		*failures++
		quiet.Warn("bench: setup call failed; retrying in 1 s", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return err
}
