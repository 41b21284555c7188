package postgres

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
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
	proxy := newProxy(t, u.Host)
	u.Host = proxy.addr()
	client := openDSN(t, u.String(), switchboard.Options{PollInterval: time.Hour})
	services := openDSN(t, dsn, switchboard.Options{})
	ctx := ctxT(t)

	boot := func(id string) *switchboard.Registration {
		in := inst("api", "10.0.0.1:80", "query_execution")
		in.ID, in.TTL = id, time.Second
		r, err := switchboard.Bootstrap(ctx, services, in, switchboard.BootstrapOptions{
			HeartbeatInterval: 200 * time.Millisecond, Logger: quietLogger()})
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

	proxy.cutAll()
	// The hub notices at the next TTL deadline, when it must read renewals.
	waitFor(t, "the cache to say it is stale", func() bool { s, _ := cache.Stale(); return s })
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

	proxy.restore()
	waitFor(t, "the cache to catch up", func() bool {
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
