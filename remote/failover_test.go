package remote_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
	"github.com/switchboard-io/switchboard/remote"
)

// fleet is three `switchboard serve` processes on one PostgreSQL catalog,
// clients registered through a DSN listing all three, and a watcher on the
// same DSN.
type fleet struct {
	t       *testing.T
	servers []*serveProcess
	dsn     string // http://A,B,C
	regs    []*switchboard.Registration
	clients []*remote.Client

	mu      sync.Mutex
	events  []switchboard.Event
	removed []switchboard.Event
	errs    []error // the watch's error events
	synced  int
}

const (
	fleetClients = 5 // in this process, each its own client
	fleetCLI     = 2 // `switchboard register` processes
	fleetTTL     = 3 * time.Second
)

func newFleet(t *testing.T) *fleet {
	if testing.Short() {
		t.Skip("builds the CLI and runs three serve processes")
	}
	pg := pgtest.Schema(t, testDSN)
	f := &fleet{t: t}
	var hosts []string
	for range 3 {
		s := startServe(t, pg)
		f.servers = append(f.servers, s)
		hosts = append(hosts, s.addr)
	}
	f.dsn = "http://" + strings.Join(hosts, ",")

	w := client(t, f.dsn, remote.Config{RequestTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := w.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range ch {
			f.mu.Lock()
			f.events = append(f.events, ev)
			switch ev.Kind {
			case switchboard.EventRemoved:
				f.removed = append(f.removed, ev)
			case switchboard.EventSynced:
				f.synced++
			case switchboard.EventError:
				f.errs = append(f.errs, ev.Err)
			}
			f.mu.Unlock()
		}
	}()
	testkit.WaitUntil(t, "the watcher's first sync", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.synced > 0 })

	for i := range fleetClients {
		c := client(t, f.dsn, remote.Config{RequestTimeout: time.Second})
		reg, err := switchboard.Bootstrap(context.Background(), c, switchboard.Instance{
			Name: "failover", Type: "querier", Address: fmt.Sprintf("127.0.0.1:%d", 9000+i), TTL: fleetTTL,
		}, switchboard.BootstrapOptions{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		f.regs = append(f.regs, reg)
		f.clients = append(f.clients, c)
	}
	for i := range fleetCLI {
		startRegister(t, f.dsn, fmt.Sprintf("cli-%d", i), fleetTTL)
	}
	testkit.WaitUntil(t, "the watcher to see every registration", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, ev := range f.events {
			if ev.Kind == switchboard.EventAdded {
				n++
			}
		}
		return n == fleetClients+fleetCLI
	})
	return f
}

// renewing waits until every client has renewed twice more (a whole
// heartbeat interval on whatever server is up), and checks what must hold
// all along: no renewal failed, no row was found gone, the watcher saw no
// removal and no outage (another server took its stream each time).
func (f *fleet) renewing(step string) {
	f.t.Helper()
	from := make([]int64, len(f.regs))
	for i, r := range f.regs {
		from[i] = r.Stats().Heartbeats
	}
	testkit.WaitUntil(f.t, step+": every client to renew twice", func() bool {
		for i, r := range f.regs {
			if r.Stats().Heartbeats < from[i]+2 {
				return false
			}
		}
		return true
	})
	// The register processes: their rows seen renewed after a heartbeat
	// interval or more has passed since the step began.
	since := time.Now()
	testkit.WaitUntil(f.t, step+": the register processes to renew", func() bool {
		list, err := f.clients[0].List(context.Background(), switchboard.Query{Name: "failover-cli", All: true})
		if err != nil || len(list) != fleetCLI {
			return false
		}
		for _, in := range list {
			if in.Stale || in.LastSeen.Before(since) {
				return false
			}
		}
		return true
	})
	f.check(step)
}

func (f *fleet) check(step string) {
	f.t.Helper()
	for i, r := range f.regs {
		if st := r.Stats(); st.Failures != 0 || st.Reregistrations != 0 {
			f.t.Fatalf("%s: client %d: %d renewals failed, %d re-registrations (server %s); a server's death cost a renewal", step, i, st.Failures, st.Reregistrations, st.Server)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		f.t.Fatalf("%s: the watcher saw %d error events while a server was up, first: %v", step, len(f.errs), f.errs[0])
	}
	if len(f.removed) > 0 {
		f.t.Fatalf("%s: the watcher saw %d removals, first %s %s (%s)", step, len(f.removed), f.removed[0].Instance.ID, f.removed[0].Reason, f.removed[0].Kind)
	}
}

// onServer waits until every client's heartbeats go to a server other than
// the ones named (by address).
func (f *fleet) avoid(step string, gone ...*serveProcess) {
	f.t.Helper()
	testkit.WaitUntil(f.t, step+": every client on a live server", func() bool {
		for _, r := range f.regs {
			for _, g := range gone {
				if strings.Contains(r.Stats().Server, g.addr) {
					return false
				}
			}
		}
		return true
	})
}

// final checks the catalog through the listed DSN: every instance there,
// none stale, and the servers' renewal counts.
func (f *fleet) final() {
	f.t.Helper()
	c := client(f.t, f.dsn, remote.Config{})
	list, err := c.List(context.Background(), switchboard.Query{All: true})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(list) != fleetClients+fleetCLI {
		f.t.Fatalf("%d instances in the catalog, want %d", len(list), fleetClients+fleetCLI)
	}
	for _, in := range list {
		if in.Stale {
			f.t.Fatalf("instance %s is stale", in.ID)
		}
	}
	f.check("at the end")
}

// TestFailoverKill: three servers; kill -9 the one every client uses, then
// the next, restart both, then kill the third: no instance expires, the
// watcher sees no removal, and every client keeps renewing, each time on a
// live server (the renewals counted by the server that took them).
func TestFailoverKill(t *testing.T) {
	f := newFleet(t)
	a, b, c := f.servers[0], f.servers[1], f.servers[2]
	f.renewing("at the start")
	for _, r := range f.regs {
		if st := r.Stats(); !strings.Contains(st.Server, a.addr) {
			t.Fatalf("a client heartbeats to %q, want the first server %s", st.Server, a.addr)
		}
	}

	a.kill()
	f.avoid("first server killed", a)
	f.renewing("first server killed")

	b.kill()
	f.avoid("second server killed", a, b)
	f.renewing("second server killed")
	atC := c.renewals()

	a.restart()
	b.restart()
	f.renewing("both restarted")
	if got := c.renewals(); got < atC+2*(fleetClients+fleetCLI) {
		t.Fatalf("the third server renewed %v instances since the others died, want at least %d more than %v", got, 2*fleetClients, atC)
	}

	c.kill()
	f.avoid("third server killed", c)
	f.renewing("third server killed")
	if got := a.renewals() + b.renewals(); got < 2*(fleetClients+fleetCLI) {
		t.Fatalf("the restarted servers renewed %v instances after the third died, want at least %d", got, 2*fleetClients)
	}
	c.restart()
	f.final()
}

// TestFailoverSIGTERM: the server every client uses is stopped gracefully
// as a heartbeat reaches it: the clients move on without a failed renewal,
// and when it is back and another stops, move again.
func TestFailoverSIGTERM(t *testing.T) {
	f := newFleet(t)
	a, b := f.servers[0], f.servers[1]
	f.renewing("at the start")

	for _, s := range []*serveProcess{a, b} {
		// As soon as the server has taken a heartbeat, the next ones are
		// on their way: stop it while they arrive.
		n := s.renewals()
		testkit.WaitUntil(t, "a heartbeat on the server", func() bool { return s.renewals() > n })
		s.signal(syscall.SIGTERM)
		f.avoid("server stopped", s)
		f.renewing("server stopped")
		s.restart()
		f.renewing("server restarted")
	}
	f.final()
}

// timedCatalog records when each heartbeat succeeded.
type timedCatalog struct {
	*remote.Client
	mu    sync.Mutex
	times []time.Time
}

func (tc *timedCatalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	missing, err := tc.Client.Heartbeat(ctx, ids...)
	if err == nil {
		tc.mu.Lock()
		tc.times = append(tc.times, time.Now())
		tc.mu.Unlock()
	}
	return missing, err
}

func (tc *timedCatalog) renewals() (int, time.Time) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if len(tc.times) == 0 {
		return 0, time.Time{}
	}
	return len(tc.times), tc.times[len(tc.times)-1]
}

// BenchmarkFailoverRenewalGap: one client of three `serve` processes (one
// DSN listing them) heartbeats every second for a TTL of 3 s; each
// iteration kills (-9) the server it heartbeats to just after a renewal
// and measures the time from that renewal to the next one, which a
// surviving server takes (the server is then started again). Reported:
// the gap's p50 and p99 beside the heartbeat interval and the TTL, and
// what the failover added to the interval (p99). Run with -benchtime=Nx.
func BenchmarkFailoverRenewalGap(b *testing.B) {
	pg := pgtest.Schema(b, testDSN)
	var servers []*serveProcess
	var hosts []string
	for range 3 {
		s := startServe(b, pg)
		servers = append(servers, s)
		hosts = append(hosts, s.addr)
	}
	const ttl, interval = 3 * time.Second, time.Second
	c := client(b, "http://"+strings.Join(hosts, ","), remote.Config{RequestTimeout: time.Second})
	tc := &timedCatalog{Client: c}
	reg, err := switchboard.Bootstrap(context.Background(), tc, switchboard.Instance{Name: "gap", Type: "querier", Address: "127.0.0.1:9100", TTL: ttl},
		switchboard.BootstrapOptions{HeartbeatInterval: interval, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	var gaps []time.Duration
	b.ResetTimer()
	for range b.N {
		n, _ := tc.renewals()
		testkit.WaitUntil(b, "a renewal", func() bool { m, _ := tc.renewals(); return m > n })
		n, before := tc.renewals()
		var victim *serveProcess
		for _, s := range servers {
			if strings.Contains(c.Server(), s.addr) {
				victim = s
			}
		}
		if victim == nil {
			b.Fatalf("the client is on %s, none of the servers", c.Server())
		}
		victim.kill()
		testkit.WaitUntil(b, "a renewal on another server", func() bool { m, _ := tc.renewals(); return m > n })
		_, after := tc.renewals()
		gaps = append(gaps, after.Sub(before))
		b.StopTimer()
		victim.restart()
		b.StartTimer()
	}
	b.StopTimer()
	if st := reg.Stats(); st.Failures != 0 || st.Reregistrations != 0 {
		b.Fatalf("%d renewals failed, %d re-registrations", st.Failures, st.Reregistrations)
	}
	slices.Sort(gaps)
	pct := func(p float64) time.Duration { return gaps[min(len(gaps)-1, int(p*float64(len(gaps))))] }
	b.ReportMetric(float64(pct(0.50).Milliseconds()), "gap-p50-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "gap-p99-ms")
	b.ReportMetric(float64((pct(0.99) - interval).Milliseconds()), "failover-p99-ms")
	b.ReportMetric(float64(interval.Milliseconds()), "interval-ms")
	b.ReportMetric(float64(ttl.Milliseconds()), "ttl-ms")
	b.ReportMetric(0, "ns/op")
}
