package kube

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// nextEvent returns the next event of ch other than Synced.
func nextEvent(ctx context.Context, t *testing.T, ch <-chan switchboard.Event) switchboard.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			if ev.Kind != switchboard.EventSynced {
				return ev
			}
		case <-ctx.Done():
			t.Fatal("no event before the test's deadline")
		}
	}
}

// TestFixedClockJudgesEverywhere: the catalog has one clock, which List,
// Get, Watch and Reap all judge Leases by. A module whose Lease is live by
// the real clock (renewed just now, for ten minutes) but was renewed an hour
// ago by the catalog's fixed clock is stale in every one of them; List, Get
// and Watch used to judge by time.Now and called it active while Reap (on
// the fixed clock) deleted it as long expired.
func TestFixedClockJudgesEverywhere(t *testing.T) {
	cat, ctx := newTestCatalog(t)
	l := registerModule(t, ctx, cat, "clocked", "10.9.9.9:8483", 10*time.Minute)
	v, _ := viewLease(l)
	// Fixed before the first Watch starts the mirror, which reads it.
	at := v.renew.Add(time.Hour)
	cat.now = func() time.Time { return at }

	if got, err := cat.Now(ctx); err != nil || !got.Equal(at) {
		t.Errorf("Now: %v, %v; want the catalog's clock, %v", got, err, at)
	}
	in, err := cat.Get(ctx, "clocked")
	if err != nil {
		t.Fatal(err)
	}
	if !in.Stale {
		t.Errorf("Get: active; want stale, its Lease renewed an hour ago by the catalog's clock")
	}
	if live, err := cat.List(ctx, switchboard.Query{}); err != nil || len(live) != 0 {
		t.Errorf("List: %+v, %v; want no active module", live, err)
	}
	if all, err := cat.List(ctx, switchboard.Query{All: true}); err != nil || len(all) != 1 || !all[0].Stale {
		t.Errorf("List All: %+v, %v; want the module, stale", all, err)
	}

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	active, err := cat.Watch(wctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var ev switchboard.Event
	select {
	case ev = <-active:
	case <-ctx.Done():
		t.Fatal("Watch: no event before the test's deadline")
	}
	if ev.Kind != switchboard.EventSynced {
		t.Errorf("Watch: first event %s %s (stale %v); want synced with no module: it is stale", ev.Kind, ev.Instance.ID, ev.Instance.Stale)
	}
	all, err := cat.Watch(wctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(ctx, t, all); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "clocked" || !ev.Instance.Stale {
		t.Errorf("Watch All: %s %s (stale %v); want clocked added, stale", ev.Kind, ev.Instance.ID, ev.Instance.Stale)
	}

	// Reap agrees: past twice its duration, the module is deleted, and
	// watchers see it leave as expired.
	if n, err := cat.Reap(ctx, 0); err != nil || n != 1 {
		t.Fatalf("Reap: %d, %v; want the module reaped", n, err)
	}
	if ev := nextEvent(ctx, t, all); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "clocked" || ev.Reason != switchboard.ReasonExpired {
		t.Errorf("Watch All after Reap: %s %s (%s); want clocked removed, expired", ev.Kind, ev.Instance.ID, ev.Reason)
	}
}

// TestFixedClockStamps: the Leases the catalog takes and renews carry its
// clock's time, so a module registered on a fixed clock is active by it
// (though an hour old by the real one) in List, Get and Reap alike.
func TestFixedClockStamps(t *testing.T) {
	cat, ctx := newTestCatalog(t)
	// Leases hold microseconds.
	at := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	cat.now = func() time.Time { return at }

	if _, err := cat.Register(ctx, switchboard.Instance{Name: "stamped", Type: TypeModule, Address: "10.9.9.8:8483", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		l, err := cat.c.getLease(ctx, "stamped"+LeaseSuffix)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := viewLease(l); !v.renew.Equal(at) {
			t.Errorf("%s: Lease renewed at %v; want the catalog's clock, %v", what, v.renew, at)
		}
		if in, err := cat.Get(ctx, "stamped"); err != nil || in.Stale {
			t.Errorf("%s: Get: %+v, %v; want the module active", what, in, err)
		}
		if live, err := cat.List(ctx, switchboard.Query{}); err != nil || len(live) != 1 {
			t.Errorf("%s: List: %+v, %v; want the module", what, live, err)
		}
		if n, err := cat.Reap(ctx, 0); err != nil || n != 0 {
			t.Errorf("%s: Reap: %d, %v; want nothing reaped", what, n, err)
		}
	}
	check("Register")
	at = at.Add(30 * time.Second)
	if missing, err := cat.Heartbeat(ctx, "stamped"); err != nil || len(missing) != 0 {
		t.Fatalf("Heartbeat: %v, %v", missing, err)
	}
	check("Heartbeat")
}
