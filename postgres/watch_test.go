package postgres

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// recorder collects a watch's events.
type recorder struct {
	mu     sync.Mutex
	events []switchboard.Event
	wake   chan struct{}
}

// watchSynced watches everything c holds until its snapshot is in, and
// returns what it records, the watch's context and its cancel (also run
// when the test ends).
func watchSynced(t *testing.T, c switchboard.Catalog) (*recorder, context.Context, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	t.Cleanup(cancel)
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, ch)
	r.waitFor(t, "snapshot", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventSynced, "") })
	return r, ctx, cancel
}

func record(t *testing.T, ch <-chan switchboard.Event) *recorder {
	r := &recorder{wake: make(chan struct{}, 1)}
	go func() {
		for ev := range ch {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}()
	return r
}

// waitFor waits until cond holds for the events so far (generous bound:
// a failure, not a performance assertion).
func (r *recorder) waitFor(t *testing.T, what string, cond func([]switchboard.Event) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		ok := cond(r.events)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.wake:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; events:\n%s", what, r.dump())
		}
	}
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// changes returns the added/updated/removed events from index from on, as
// "kind reason id" strings.
func (r *recorder) changes(from int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changesLocked(from)
}

func (r *recorder) changesLocked(from int) []string {
	var out []string
	for _, ev := range r.events[from:] {
		switch ev.Kind {
		case switchboard.EventAdded, switchboard.EventUpdated, switchboard.EventRemoved:
			s := string(ev.Kind)
			if ev.Reason != "" {
				s += " " + string(ev.Reason)
			}
			out = append(out, s+" "+ev.Instance.ID)
		}
	}
	return out
}

func (r *recorder) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.events {
		fmt.Fprintf(&b, "  %s %s %s %v\n", ev.Kind, ev.Reason, ev.Instance.ID, ev.Err)
	}
	return b.String()
}

func has(evs []switchboard.Event, kind switchboard.EventKind, id string) bool {
	return slices.ContainsFunc(evs, func(ev switchboard.Event) bool { return ev.Kind == kind && ev.Instance.ID == id })
}

func reg(t *testing.T, c *Catalog, id, addr string) switchboard.Instance {
	t.Helper()
	in := inst("svc", addr)
	in.ID, in.TTL = id, time.Minute
	out, err := c.Register(ctxT(t), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWatchPush(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	// An hour-long poll: only NOTIFY can deliver in time.
	watcher := openDSN(t, dsn, switchboard.Options{PollInterval: time.Hour})
	writer := openDSN(t, dsn, switchboard.Options{})
	reg(t, writer, "a", "h:1")
	r, ctx, cancel := watchSynced(t, watcher)
	// Each write waits for its event: a watch mirrors state, so writes the
	// hub reads in one batch coalesce (b added and removed between two
	// reads is, correctly, no event at all).
	reg(t, writer, "b", "h:2")
	r.waitFor(t, "b", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "b") })
	reg(t, writer, "a", "h:3")
	r.waitFor(t, "a moved", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventUpdated, "a") })
	if _, err := writer.Heartbeat(ctxT(t), "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := writer.Deregister(ctxT(t), "b"); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "b gone", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventRemoved, "b") })
	reg(t, writer, "marker", "h:9")
	r.waitFor(t, "marker", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "marker") })
	want := []string{"added a", "added b", "updated a", "removed deregistered b", "added marker"}
	if got := r.changes(0); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if st := watcher.WatchStats(); !st.Healthy || st.Watchers != 1 || st.Instances != 2 {
		t.Fatalf("WatchStats %+v, want healthy, 1 watcher, 2 instances", st)
	}
	if st := writer.WatchStats(); !st.Healthy || st.Watchers != 0 {
		t.Fatalf("WatchStats of a handle nobody watches: %+v", st)
	}
	// A second watcher of the same catalog shares its hub and listener.
	ch2, err := watcher.Watch(ctx, switchboard.Query{Name: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	r2 := record(t, ch2)
	r2.waitFor(t, "second snapshot", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventSynced, "") })
	if got := r2.changes(0); !slices.Equal(got, []string{"added a", "added marker"}) {
		t.Fatalf("second watcher snapshot %q", got)
	}
	cancel()
}

// TestListenerReconnect puts a proxy between a watching catalog and the
// server, cuts it, changes the catalog through another handle meanwhile,
// restores it, and checks that the watcher hears exactly those changes: no
// missed removal, no duplicate addition. With trim, the log no longer holds
// the watcher's position, and the hub must resync from a snapshot instead.
func TestListenerReconnect(t *testing.T) {
	for _, trim := range []bool{false, true} {
		t.Run(fmt.Sprintf("trim=%v", trim), func(t *testing.T) { testListenerReconnect(t, trim) })
	}
}

func testListenerReconnect(t *testing.T, trim bool) {
	dsn := pgtest.Schema(t, testDSN)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testkit.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	watcher := openDSN(t, u.String(), switchboard.Options{PollInterval: time.Hour})
	writer := openDSN(t, dsn, switchboard.Options{})
	var listens atomic.Int32
	watcher.onListen = func() { listens.Add(1) }

	reg(t, writer, "keep", "h:1")
	reg(t, writer, "gone", "h:2")
	reg(t, writer, "moved", "h:3")
	r, _, _ := watchSynced(t, watcher)
	reg(t, writer, "live", "h:4")
	r.waitFor(t, "push before the cut", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "live") })
	before := r.len()

	proxy.CutAll()
	reg(t, writer, "new", "h:5")
	if err := writer.Deregister(ctxT(t), "gone"); err != nil {
		t.Fatal(err)
	}
	reg(t, writer, "moved", "h:33")
	reg(t, writer, "transient", "h:6")
	if err := writer.Deregister(ctxT(t), "transient"); err != nil {
		t.Fatal(err)
	}
	if trim {
		writer.keepEntries, writer.keepAge = 1, 0
		if _, err := writer.Reap(ctxT(t), 0); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	proxy.Restore()
	// No write after the restore: the reconnected listener's Notify (or the
	// hub's own retry) must bring the changes.
	// With the log trimmed past the watcher, only a snapshot tells that
	// gone is gone, and a snapshot cannot tell why: unknown, not a guess.
	removal := "removed deregistered gone"
	if trim {
		removal = "removed unknown gone"
	}
	want := []string{"added new", removal, "updated moved"}
	r.waitFor(t, "changes after the outage", func([]switchboard.Event) bool {
		got := r.changesLocked(before)
		return !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, w) })
	})
	t.Logf("caught up %v after the proxy came back; listener connected %d times", time.Since(start), listens.Load())
	// Anything still to come (a duplicate) arrives before a later change.
	reg(t, writer, "marker", "h:10")
	r.waitFor(t, "marker", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "marker") })
	want = append(want, "added marker")
	if listens.Load() < 2 {
		t.Fatalf("listener connected %d times, want a reconnection", listens.Load())
	}
	got := r.changes(before)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after the outage: %q, want exactly %q\nall events:\n%s", got, want, r.dump())
	}
}
