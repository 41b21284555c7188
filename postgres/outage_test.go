package postgres

import (
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestDiscoveryOutage runs services (Bootstrap: heartbeats, reaper) on one
// catalog handle and a discovery cache on another behind a proxy. While the
// proxy is cut the cache keeps serving what it knew, marked stale; services
// come and go meanwhile; once restored the cache holds exactly the new set
// and is fresh again, and no live service was ever expired.
func TestDiscoveryOutage(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	u, _ := url.Parse(dsn)
	proxy := testkit.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	client := openDSN(t, u.String(), switchboard.Options{PollInterval: time.Hour})
	services := openDSN(t, dsn, switchboard.Options{})
	ctx := ctxT(t)

	boot := func(id string) *switchboard.Registration {
		in := inst("api", "10.0.0.1:80", "query_execution")
		in.ID, in.TTL = id, 3*time.Second
		r, err := switchboard.Bootstrap(ctx, services, in, switchboard.BootstrapOptions{
			HeartbeatInterval: 300 * time.Millisecond, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	boot("a")
	leaving := boot("b")

	var removed []string
	events := make(chan switchboard.Event, 1024)
	cache, err := discovery.New(ctx, client, discovery.Options{Logger: quietLogger(), OnEvent: func(ev switchboard.Event) {
		events <- ev
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	ids := func() []string {
		var out []string
		for _, in := range cache.ByCapability("query_execution") {
			out = append(out, in.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("cache before the outage: %v", got)
	}

	proxy.CutAll()
	// The hub notices at the next TTL deadline, when it must read renewals.
	testkit.WaitUntil(t, "the cache to say it is stale", func() bool { s, _ := cache.Stale(); return s })
	if got := ids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("cache during the outage: %v, want the last known set", got)
	}
	if err := leaving.Close(); err != nil {
		t.Fatal(err)
	}
	boot("c")
	// Longer than the TTL: the cache must not expire what it cannot see.
	time.Sleep(1500 * time.Millisecond)
	if got := ids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("cache during a long outage: %v, want the last known set", got)
	}

	proxy.Restore()
	testkit.WaitUntil(t, "the cache to catch up", func() bool {
		s, _ := cache.Stale()
		return !s && slices.Equal(ids(), []string{"a", "c"})
	})
	// Let a couple of TTLs pass: the grace after the outage must not turn
	// into false expiries of live services.
	time.Sleep(2500 * time.Millisecond)
	if got := ids(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("cache after recovery: %v, want [a c]", got)
	}
	for len(events) > 0 {
		ev := <-events
		if ev.Kind == switchboard.EventRemoved {
			removed = append(removed, string(ev.Reason)+" "+ev.Instance.ID)
		}
	}
	if !slices.Equal(removed, []string{"deregistered b"}) {
		t.Fatalf("removals seen by the cache: %q, want exactly [deregistered b]", removed)
	}
}

// TestOutageForEveryone cuts services and watcher alike (the catalog is
// down for everybody), once for less than the TTL and once for more: no
// `removed` event anywhere, because nothing is expired while the catalog
// cannot be read and, after it returns, expiry waits one TTL, in which the
// services heartbeat again. The TTL (3 s) leaves the services ten
// heartbeats of that grace to reach the catalog again, so that a loaded
// host's slow reconnection is not taken for a dead service; the test
// waits for their renewals, not for a fixed time.
func TestOutageForEveryone(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	u, _ := url.Parse(dsn)
	// Two proxies, so the test can choose who gets the catalog back first.
	clientProxy, serviceProxy := testkit.NewProxy(t, u.Host), testkit.NewProxy(t, u.Host)
	u.Host = clientProxy.Addr()
	client := openDSN(t, u.String(), switchboard.Options{PollInterval: time.Hour})
	u.Host = serviceProxy.Addr()
	services := openDSN(t, u.String(), switchboard.Options{})
	ctx := ctxT(t)

	var regs []*switchboard.Registration
	for _, id := range []string{"a", "b", "c"} {
		in := inst("api", "10.0.0.1:80", "query_execution")
		in.ID, in.TTL = id, time.Second
		r, err := switchboard.Bootstrap(ctx, services, in, switchboard.BootstrapOptions{
			HeartbeatInterval: 200 * time.Millisecond, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		regs = append(regs, r)
	}
	var mu sync.Mutex
	var removed []string
	errorEvents := 0
	cache, err := discovery.New(ctx, client, discovery.Options{Logger: quietLogger(), OnEvent: func(ev switchboard.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case switchboard.EventRemoved:
			removed = append(removed, string(ev.Reason)+" "+ev.Instance.ID)
		case switchboard.EventError:
			errorEvents++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()

	for _, outage := range []time.Duration{time.Second, 4 * time.Second} {
		clientProxy.CutAll()
		serviceProxy.CutAll()
		time.Sleep(outage)
		if got := len(cache.ByCapability("query_execution")); got != 3 {
			t.Fatalf("during a %v outage the cache serves %d instances, want the last known 3", outage, got)
		}
		// The watcher gets the catalog back first and sees every service's
		// last heartbeat far in the past; the services follow a moment
		// later, within a heartbeat interval or so.
		clientProxy.Restore()
		testkit.WaitUntil(t, "the watcher to reach the catalog again", func() bool {
			s, _ := cache.Stale()
			return !s
		})
		time.Sleep(200 * time.Millisecond)
		before := make([]int64, len(regs))
		for i, r := range regs {
			before[i] = r.Stats().Heartbeats
		}
		serviceProxy.Restore()
		testkit.WaitUntil(t, "every service to renew again", func() bool {
			for i, r := range regs {
				if r.Stats().Heartbeats <= before[i] {
					return false
				}
			}
			return true
		})
		testkit.WaitUntil(t, "the cache to serve the three, not stale", func() bool {
			s, _ := cache.Stale()
			return !s && len(cache.ByCapability("query_execution")) == 3
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(removed) != 0 {
		t.Fatalf("outages produced removals: %q", removed)
	}
	if errorEvents == 0 {
		t.Fatal("the long outage was never reported to the cache")
	}
	for _, r := range regs {
		if s := r.Stats(); s.Failures == 0 || s.Reregistrations != 0 {
			t.Errorf("registration %s: %+v (want failed heartbeats during the outage, no re-registration)", r.ID(), s)
		}
	}
}
