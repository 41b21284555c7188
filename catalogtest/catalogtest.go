// Package catalogtest is the backend-independent conformance suite: every
// switchboard.Catalog backend runs Run unchanged against its real engine
// (a SQLite file, a PostgreSQL database, …).
package catalogtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// Open returns a fresh, empty catalog for one test. It registers its own
// cleanup (dropping the database, removing the file) with t.Cleanup.
type Open func(t *testing.T) switchboard.Catalog

// Run runs the whole conformance suite, each case on its own fresh catalog.
func Run(t *testing.T, open Open) {
	runCases(t, open, []testCase{
		{"RegisterUpsert", testRegisterUpsert},
		{"InvalidInputWritesNothing", testInvalidInput},
		{"Filters", testFilters},
		{"UnknownCapabilitiesKept", testUnknownCapabilities},
		{"TTLFilter", testTTLFilter},
		{"TTLPrecision", testTTLPrecision},
		{"DefaultTTLTold", testDefaultTTLTold},
		{"HeartbeatMissing", testHeartbeatMissing},
		{"Deregister", testDeregister},
		{"UnstorableKeysNameNothing", testUnstorableKeys},
		{"Reap", testReap},
		{"ReapGrace", testReapGrace},
		{"WatchSnapshotAndDeltas", testWatchDeltas},
		{"Revisions", testRevisions},
		{"WatchFrom", testWatchFrom},
		{"WatchFilter", testWatchFilter},
		{"WatchHeartbeatIsNotAnEvent", testWatchHeartbeat},
		{"WatchExpiryAndRevival", testWatchExpiry},
		{"WatchRevivalByReregister", testWatchRevivalByReregister},
		{"WatchReapAfterExpiry", testWatchReap},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Close", testClose},
	})
}

// testCase is one case of a suite: a name and a test of one fresh catalog.
type testCase struct {
	name string
	fn   func(t *testing.T, c switchboard.Catalog)
}

// runCases runs each case as a subtest on its own fresh catalog from open.
func runCases(t *testing.T, open Open, cases []testCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t)
			t.Cleanup(func() { c.Close() })
			tc.fn(t, c)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func sample(name string, caps ...string) switchboard.Instance {
	return switchboard.Instance{
		Name: name, Type: switchboard.TypeWriter, Address: "127.0.0.1:4317",
		Capabilities: caps, Version: "1.2.3",
		Metadata: map[string]string{"zone": "a"},
	}
}

func mustRegister(t *testing.T, c switchboard.Catalog, in switchboard.Instance) switchboard.Instance {
	t.Helper()
	out, err := c.Register(ctx(t), in)
	if err != nil {
		t.Fatalf("register %s: %v", in.Name, err)
	}
	return out
}

func ids(ins []switchboard.Instance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.ID)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func testRegisterUpsert(t *testing.T, c switchboard.Catalog) {
	in := sample("Github.com/Org/Writer_Module", switchboard.CapStorage, switchboard.CapTraceIngestion)
	in.Components = json.RawMessage(`{"components":[{"name":"router"}]}`)
	a := mustRegister(t, c, in)
	if a.ID == "" {
		t.Fatal("no id generated")
	}
	if a.Name != "github-com-org-writer-module" {
		t.Fatalf("name not sanitised: %q", a.Name)
	}
	if a.TTL <= 0 {
		t.Fatalf("default ttl not applied: %v", a.TTL)
	}
	if a.RegisteredAt.IsZero() || a.LastSeen.IsZero() || a.Stale {
		t.Fatalf("timestamps: %+v", a)
	}
	got, err := c.Get(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Capabilities, in.Capabilities) || got.Metadata["zone"] != "a" || got.Version != "1.2.3" {
		t.Fatalf("round trip: %+v", got)
	}
	var comp, want any
	if err := json.Unmarshal(got.Components, &comp); err != nil {
		t.Fatalf("components: %v", err)
	}
	json.Unmarshal(in.Components, &want)
	if fmt.Sprint(comp) != fmt.Sprint(want) {
		t.Fatalf("components %s, want %s", got.Components, in.Components)
	}

	time.Sleep(20 * time.Millisecond)
	upd := a
	upd.Address = "[::1]:9000"
	upd.Capabilities = []string{switchboard.CapQueryExecution}
	upd.TTL = 42 * time.Second
	b := mustRegister(t, c, upd)
	if b.ID != a.ID || b.Address != "[::1]:9000" || b.TTL != 42*time.Second {
		t.Fatalf("upsert: %+v", b)
	}
	if !b.RegisteredAt.Equal(a.RegisteredAt) {
		t.Fatalf("registered_at changed on upsert: %v -> %v", a.RegisteredAt, b.RegisteredAt)
	}
	if !b.LastSeen.After(a.LastSeen) {
		t.Fatalf("last_seen not advanced: %v -> %v", a.LastSeen, b.LastSeen)
	}
	all, err := c.List(ctx(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || !slices.Equal(all[0].Capabilities, []string{switchboard.CapQueryExecution}) {
		t.Fatalf("after upsert: %+v", all)
	}
	if hits, _ := c.List(ctx(t), switchboard.Query{Capability: switchboard.CapStorage}); len(hits) != 0 {
		t.Fatalf("old capability still indexed: %+v", hits)
	}

	given := sample("fixed")
	given.ID = "writer-1"
	if g := mustRegister(t, c, given); g.ID != "writer-1" {
		t.Fatalf("given id not kept: %q", g.ID)
	}
}

func testInvalidInput(t *testing.T, c switchboard.Catalog) {
	good := mustRegister(t, c, sample("keep", "a"))
	bad := []func(*switchboard.Instance){
		func(in *switchboard.Instance) { in.Name = "--" },
		func(in *switchboard.Instance) { in.Address = "localhost" },
		func(in *switchboard.Instance) { in.Address = "::1:80" },
		func(in *switchboard.Instance) { in.Address = "h:70000" },
		func(in *switchboard.Instance) { in.Capabilities = []string{"bad cap"} },
		func(in *switchboard.Instance) { in.Type = "" },
		func(in *switchboard.Instance) { in.Components = json.RawMessage(`{`) },
		func(in *switchboard.Instance) { in.TTL = -time.Second },
		func(in *switchboard.Instance) { in.ID = "has space" },
		func(in *switchboard.Instance) { in.Metadata = map[string]string{"zone": "a\x00b"} },
	}
	for i, mut := range bad {
		in := good
		in.Capabilities = slices.Clone(good.Capabilities)
		mut(&in)
		if _, err := c.Register(ctx(t), in); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("case %d: want ErrInvalid, got %v", i, err)
		}
	}
	all, err := c.List(ctx(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Address != good.Address || all[0].Name != "keep" || !slices.Equal(all[0].Capabilities, []string{"a"}) {
		t.Fatalf("stored row changed by invalid input: %+v", all)
	}
}

func testFilters(t *testing.T, c switchboard.Catalog) {
	w := mustRegister(t, c, sample("writer", switchboard.CapStorage, switchboard.CapTraceIngestion))
	q := sample("querier", switchboard.CapQueryExecution)
	q.Type = switchboard.TypeQuerier
	qi := mustRegister(t, c, q)
	a := sample("acceptor", switchboard.CapTraceIngestion)
	a.Type = switchboard.TypeAcceptor
	ai := mustRegister(t, c, a)
	for _, tc := range []struct {
		q    switchboard.Query
		want []string
	}{
		{switchboard.Query{}, sorted(w.ID, qi.ID, ai.ID)},
		{switchboard.Query{Name: "writer"}, []string{w.ID}},
		{switchboard.Query{Type: switchboard.TypeQuerier}, []string{qi.ID}},
		{switchboard.Query{Capability: switchboard.CapTraceIngestion}, sorted(w.ID, ai.ID)},
		{switchboard.Query{Capability: switchboard.CapTraceIngestion, Type: switchboard.TypeAcceptor}, []string{ai.ID}},
		{switchboard.Query{Capability: "nope"}, []string{}},
		{switchboard.Query{Name: "writer", Type: switchboard.TypeQuerier}, []string{}},
	} {
		got, err := c.List(ctx(t), tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.q, ids(got), tc.want)
		}
	}
	got, _ := c.List(ctx(t), switchboard.Query{})
	for i := 1; i < len(got); i++ {
		if got[i-1].Name > got[i].Name {
			t.Fatalf("not ordered by name: %v", got)
		}
	}
}

func testUnknownCapabilities(t *testing.T, c switchboard.Catalog) {
	in := mustRegister(t, c, sample("edge", "custom.cap:v2", "x-ray", switchboard.CapRouting))
	got, err := c.List(ctx(t), switchboard.Query{Capability: "custom.cap:v2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != in.ID {
		t.Fatalf("unknown capability not discoverable: %+v", got)
	}
	if !slices.Equal(got[0].Capabilities, []string{"custom.cap:v2", "x-ray", switchboard.CapRouting}) {
		t.Fatalf("capabilities not returned as stored: %v", got[0].Capabilities)
	}
}

func testTTLFilter(t *testing.T, c switchboard.Catalog) {
	short := sample("short")
	short.TTL = 300 * time.Millisecond
	s := mustRegister(t, c, short)
	l := mustRegister(t, c, sample("long"))
	testkit.WaitUntil(t, "short instance to go stale", func() bool {
		got, err := c.List(ctx(t), switchboard.Query{})
		return err == nil && slices.Equal(ids(got), []string{l.ID})
	})
	all, err := c.List(ctx(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("All: %+v", all)
	}
	var before time.Time
	for _, in := range all {
		if (in.ID == s.ID) != in.Stale {
			t.Fatalf("stale flag wrong: %+v", in)
		}
		if in.ID == s.ID {
			before = in.LastSeen
		}
	}
	if missing, err := c.Heartbeat(ctx(t), s.ID); err != nil || len(missing) != 0 {
		t.Fatalf("heartbeat: %v %v", missing, err)
	}
	// Revived, on the catalog's own clock: the row was read stale (more
	// than its TTL past last_seen), so the heartbeat, later, put last_seen
	// at least a TTL past what it was. Whether a List then still finds it
	// live depends on how long the machine takes to ask; a List that finds
	// it must find it live, and one that asks for all rows must find it.
	got, err := c.List(ctx(t), switchboard.Query{Name: "short"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 1 || len(got) == 1 && (got[0].ID != s.ID || got[0].Stale) {
		t.Fatalf("List of live rows after the heartbeat: %+v", got)
	}
	again, err := c.List(ctx(t), switchboard.Query{Name: "short", All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].LastSeen.Before(before.Add(short.TTL)) {
		t.Fatalf("heartbeat did not revive: last_seen was %v (stale at TTL %s), now %+v", before, short.TTL, again)
	}
}

// testDefaultTTLTold: a catalog that tells its default TTL
// (switchboard.TTLDefaulter, which Bootstrap checks a heartbeat interval
// against before writing) stores exactly that TTL for an instance without
// one. Zero is a catalog that cannot tell now (remote, with a server that
// does not say): skipped, as a catalog that does not implement it.
func testDefaultTTLTold(t *testing.T, c switchboard.Catalog) {
	d, ok := c.(switchboard.TTLDefaulter)
	if !ok {
		t.Skip("the catalog does not tell its default TTL (switchboard.TTLDefaulter): Bootstrap checks against the stored TTL")
	}
	want := d.DefaultTTL()
	switch {
	case want == 0:
		t.Skip("DefaultTTL() = 0: the catalog cannot tell its default TTL now; Bootstrap checks against the stored TTL")
	case want < 0:
		t.Fatalf("DefaultTTL() = %v: want positive, or 0 when the catalog cannot tell", want)
	}
	if got := mustRegister(t, c, sample("default-ttl")).TTL; got != want {
		t.Fatalf("an instance without a TTL was stored with %v; DefaultTTL() says %v", got, want)
	}
}

// testTTLPrecision pins how a TTL is stored (millis.Round): rounded
// up to whole milliseconds, the same on every backend, so one registration
// expires at the same moment on each; Register, Get, List and Watch all
// give the stored TTL. A backend whose storage is coarser rounds up to its
// own unit (kube://: Lease durations are whole seconds), which the first
// registration finds out.
func testTTLPrecision(t *testing.T, c switchboard.Catalog) {
	probe := sample("ttl-probe")
	probe.TTL = 1500 * time.Millisecond
	unit := time.Millisecond
	switch got := mustRegister(t, c, probe).TTL; got {
	case probe.TTL:
	case 2 * time.Second:
		unit = time.Second
	default:
		t.Fatalf("TTL %v stored as %v: want it kept (whole milliseconds), or 2s on a backend that keeps whole seconds", probe.TTL, got)
	}
	ttls := []time.Duration{
		time.Millisecond + time.Nanosecond,
		2*time.Second + 1500*time.Microsecond,
		5*time.Second + time.Nanosecond,
		5*time.Second + 400*time.Microsecond,
		5*time.Second + 999999*time.Nanosecond,
		5*time.Second + 2*time.Millisecond,
	}
	want := make(map[string]time.Duration, len(ttls))
	for i, ttl := range ttls {
		in := sample("ttl")
		in.ID = fmt.Sprintf("ttl-%d", i)
		in.TTL = ttl
		w := (ttl + unit - 1) / unit * unit
		want[in.ID] = w
		if got := mustRegister(t, c, in).TTL; got != w {
			t.Errorf("Register with TTL %v returned TTL %v, want %v", ttl, got, w)
		}
		got, err := c.Get(ctx(t), in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.TTL != w {
			t.Errorf("TTL %v: Get returned TTL %v, want %v", ttl, got.TTL, w)
		}
	}
	listed, err := c.List(ctx(t), switchboard.Query{Name: "ttl", All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(ttls) {
		t.Fatalf("List: %d instances, want %d", len(listed), len(ttls))
	}
	for _, in := range listed {
		if in.TTL != want[in.ID] {
			t.Errorf("List: %s has TTL %v, want %v", in.ID, in.TTL, want[in.ID])
		}
	}
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	events, err := c.Watch(wctx, switchboard.Query{Name: "ttl", All: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for ev := range events {
		if ev.Kind == switchboard.EventSynced {
			break
		}
		if ev.Kind != switchboard.EventAdded {
			continue
		}
		seen++
		if ev.Instance.TTL != want[ev.Instance.ID] {
			t.Errorf("Watch: %s has TTL %v, want %v", ev.Instance.ID, ev.Instance.TTL, want[ev.Instance.ID])
		}
	}
	if seen != len(ttls) {
		t.Fatalf("Watch: %d instances before synced, want %d", seen, len(ttls))
	}
}

func testHeartbeatMissing(t *testing.T, c switchboard.Catalog) {
	a := mustRegister(t, c, sample("a"))
	b := mustRegister(t, c, sample("b"))
	before, _ := c.Get(ctx(t), a.ID)
	time.Sleep(20 * time.Millisecond)
	missing, err := c.Heartbeat(ctx(t), a.ID, "ghost-1", b.ID, "ghost-2")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(missing...), []string{"ghost-1", "ghost-2"}) {
		t.Fatalf("missing = %v", missing)
	}
	after, _ := c.Get(ctx(t), a.ID)
	if !after.LastSeen.After(before.LastSeen) {
		t.Fatalf("last_seen not renewed: %v -> %v", before.LastSeen, after.LastSeen)
	}
	if missing, err := c.Heartbeat(ctx(t)); err != nil || len(missing) != 0 {
		t.Fatalf("empty heartbeat: %v %v", missing, err)
	}
}

func testDeregister(t *testing.T, c switchboard.Catalog) {
	a := mustRegister(t, c, sample("a"))
	if err := c.Deregister(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx(t), a.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("get after deregister: %v", err)
	}
	if err := c.Deregister(ctx(t), a.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("second deregister: want ErrNotFound, got %v", err)
	}
	if missing, _ := c.Heartbeat(ctx(t), a.ID); !slices.Equal(missing, []string{a.ID}) {
		t.Fatalf("heartbeat after deregister: missing = %v", missing)
	}
}

func testReap(t *testing.T, c switchboard.Catalog) {
	short := sample("short")
	short.TTL = 500 * time.Millisecond
	s := mustRegister(t, c, short)
	l := mustRegister(t, c, sample("long"))
	// Right after registering, nothing is 2×TTL old... unless this machine
	// took a second between the calls: judged on the catalog's clock, not
	// the test's, a reap now is early only if the row is still younger
	// than 2×TTL after it.
	n, err := c.Reap(ctx(t), 0)
	if err != nil {
		t.Fatalf("early reap: %v", err)
	}
	if n != 0 {
		now, err := c.Now(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 || now.Sub(s.LastSeen) <= 2*short.TTL {
			t.Fatalf("early reap: %d rows, the short one %v old (TTL %v)", n, now.Sub(s.LastSeen), short.TTL)
		}
	}
	// Stale but not yet 2×TTL old... then past it (unless the reap above
	// came late enough to take it).
	if n == 0 {
		testkit.WaitUntil(t, "short row to be reaped at 2×TTL", func() bool {
			n, err := c.Reap(ctx(t), 0)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
	}
	if n, err := c.Reap(ctx(t), 0); err != nil || n != 0 {
		t.Fatalf("reap is not idempotent: %d %v", n, err)
	}
	if _, err := c.Get(ctx(t), s.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("reaped row still there: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n, err := c.Reap(ctx(t), 20*time.Millisecond); err != nil || n != 1 {
		t.Fatalf("reap --older-than: %d %v", n, err)
	}
	if _, err := c.Get(ctx(t), l.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("row older than the cutoff not reaped: %v", err)
	}
}

// testReapGrace checks switchboard.ReapGrace: a row stale for twice its TTL
// is reaped only once the caller has been reachable for that row's own TTL,
// in one call on a GraceReaper, and through listing on any other catalog.
func testReapGrace(t *testing.T, c switchboard.Catalog) {
	if _, err := switchboard.ReapGrace(ctx(t), c, -time.Second); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("negative reachableFor: %v, want ErrInvalid", err)
	}
	if g, ok := c.(switchboard.GraceReaper); ok {
		if _, err := g.ReapGrace(ctx(t), -time.Second); !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("GraceReaper, negative reachableFor: %v, want ErrInvalid", err)
		}
	}
	short, long := sample("short"), sample("long")
	short.TTL, long.TTL = time.Second, 2*time.Second
	s := mustRegister(t, c, short)
	l := mustRegister(t, c, long)
	keep := mustRegister(t, c, sample("kept")) // default TTL, heartbeated
	// Both stale for twice their TTL (the long row's 4 s).
	testkit.WaitUntil(t, "both rows stale for twice their TTL", func() bool {
		if _, err := c.Heartbeat(ctx(t), keep.ID); err != nil {
			t.Fatal(err)
		}
		now, err := c.Now(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx(t), l.ID)
		if err != nil {
			t.Fatal(err)
		}
		return now.Sub(got.LastSeen) > 2*long.TTL+100*time.Millisecond
	})
	// Reachable for less than either TTL: both inside their grace.
	if n, err := switchboard.ReapGrace(ctx(t), c, 500*time.Millisecond); err != nil || n != 0 {
		t.Fatalf("reap inside every grace: %d %v, want 0", n, err)
	}
	// Reachable for the short row's TTL, not the long one's. A GraceReaper
	// reaps the short row alone; through listing the round waits for the
	// long row's grace to end, so nothing is deleted yet.
	want := 0
	if _, ok := c.(switchboard.GraceReaper); ok {
		want = 1
	}
	if n, err := switchboard.ReapGrace(ctx(t), c, 1500*time.Millisecond); err != nil || n != want {
		t.Fatalf("reap with the short row's grace over: %d %v, want %d", n, err, want)
	}
	if want == 1 {
		if _, err := c.Get(ctx(t), s.ID); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("short row still there: %v", err)
		}
		if _, err := c.Get(ctx(t), l.ID); err != nil {
			t.Fatalf("long row reaped inside its grace: %v", err)
		}
	}
	if n, err := switchboard.ReapGrace(ctx(t), c, time.Hour); err != nil || n != 2-want {
		t.Fatalf("reap with every grace over: %d %v, want %d", n, err, 2-want)
	}
	for _, id := range []string{s.ID, l.ID} {
		if _, err := c.Get(ctx(t), id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("row %s still there: %v", id, err)
		}
	}
	if _, err := c.Get(ctx(t), keep.ID); err != nil {
		t.Fatalf("a live row was reaped: %v", err)
	}
}

// watcher reads a watch in the background so tests can wait for events.
type watcher struct {
	t      *testing.T
	mu     sync.Mutex
	events []switchboard.Event
	synced bool
	closed bool
	cond   chan struct{}
}

func watch(t *testing.T, c switchboard.Catalog, q switchboard.Query) *watcher {
	t.Helper()
	wctx, cancel := context.WithCancel(context.Background())
	ch, err := c.Watch(wctx, q)
	if err != nil {
		cancel()
		t.Fatalf("watch: %v", err)
	}
	w := &watcher{t: t, cond: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ev := range ch {
			w.mu.Lock()
			if ev.Kind == switchboard.EventSynced {
				w.synced = true
			} else {
				w.events = append(w.events, ev)
			}
			w.mu.Unlock()
			select {
			case w.cond <- struct{}{}:
			default:
			}
		}
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	}()
	w.waitSynced()
	return w
}

func (w *watcher) waitSynced() {
	w.t.Helper()
	testkit.WaitUntil(w.t, "snapshot synced", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.synced
	})
}

// next waits for the n-th event (0-based) and returns it.
func (w *watcher) next(n int) switchboard.Event {
	w.t.Helper()
	var ev switchboard.Event
	testkit.WaitUntil(w.t, fmt.Sprintf("event #%d", n), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.events) > n {
			ev = w.events[n]
			return true
		}
		return false
	})
	return ev
}

func (w *watcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

func (w *watcher) dump() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := ""
	for _, ev := range w.events {
		s += fmt.Sprintf("\n  %s %s %s %s", ev.Kind, ev.Reason, ev.Instance.Name, ev.Instance.ID)
	}
	return s
}

func expect(t *testing.T, ev switchboard.Event, kind switchboard.EventKind, reason switchboard.Reason, id string) {
	t.Helper()
	if ev.Kind != kind || ev.Reason != reason || ev.Instance.ID != id {
		t.Fatalf("got %s/%s %s, want %s/%s %s", ev.Kind, ev.Reason, ev.Instance.ID, kind, reason, id)
	}
}

func testWatchDeltas(t *testing.T, c switchboard.Catalog) {
	a := mustRegister(t, c, sample("a"))
	b := mustRegister(t, c, sample("b"))
	w := watch(t, c, switchboard.Query{})
	if w.count() != 2 {
		t.Fatalf("snapshot: want 2 added before synced, got%s", w.dump())
	}
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	expect(t, w.next(1), switchboard.EventAdded, "", b.ID)

	cc := mustRegister(t, c, sample("c"))
	expect(t, w.next(2), switchboard.EventAdded, "", cc.ID)
	upd := a
	upd.Version = "2.0.0"
	mustRegister(t, c, upd)
	ev := w.next(3)
	expect(t, ev, switchboard.EventUpdated, "", a.ID)
	if ev.Instance.Version != "2.0.0" {
		t.Fatalf("updated event carries old content: %+v", ev.Instance)
	}
	// Re-registering the same content is a heartbeat, not an update.
	mustRegister(t, c, upd)
	if err := c.Deregister(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	expect(t, w.next(4), switchboard.EventRemoved, switchboard.ReasonDeregistered, b.ID)
	if w.count() != 5 {
		t.Fatalf("extra events:%s", w.dump())
	}
}

func testWatchFilter(t *testing.T, c switchboard.Catalog) {
	w := watch(t, c, switchboard.Query{Capability: "search"})
	mustRegister(t, c, sample("other", "storage"))
	s := mustRegister(t, c, sample("finder", "search"))
	expect(t, w.next(0), switchboard.EventAdded, "", s.ID)
	if w.count() != 1 {
		t.Fatalf("filtered watch saw others:%s", w.dump())
	}
}

func testWatchHeartbeat(t *testing.T, c switchboard.Catalog) {
	in := sample("beating")
	// Heartbeats every 100 ms against a 3 s TTL: even on a loaded machine
	// the row never goes stale, so any event here is a heartbeat leaking.
	in.TTL = 3 * time.Second
	a := mustRegister(t, c, in)
	w := watch(t, c, switchboard.Query{})
	for i := 0; i < 12; i++ {
		time.Sleep(100 * time.Millisecond)
		if _, err := c.Heartbeat(ctx(t), a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if w.count() != 1 {
		t.Fatalf("heartbeats produced events:%s", w.dump())
	}
}

func testWatchExpiry(t *testing.T, c switchboard.Catalog) {
	in := sample("mortal")
	in.TTL = time.Second
	// Watch first: registered before, the instance could already be past
	// its TTL when the watch starts on a slow machine, and never be shown.
	w := watch(t, c, switchboard.Query{})
	start := time.Now()
	a := mustRegister(t, c, in)
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	ev := w.next(1)
	expect(t, ev, switchboard.EventRemoved, switchboard.ReasonExpired, a.ID)
	if !ev.Instance.Stale {
		t.Fatal("expired instance not marked stale")
	}
	t.Logf("expired %v after registration (ttl %v)", time.Since(start), in.TTL)
	if _, err := c.Heartbeat(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	expect(t, w.next(2), switchboard.EventAdded, "", a.ID)
}

// testWatchRevivalByReregister: registering an expired instance again with
// identical content brings it back like a heartbeat does; watchers see it
// added again at once, not at the next full resync.
func testWatchRevivalByReregister(t *testing.T, c switchboard.Catalog) {
	in := sample("phoenix")
	in.TTL = time.Second
	w := watch(t, c, switchboard.Query{})
	a := mustRegister(t, c, in)
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	expect(t, w.next(1), switchboard.EventRemoved, switchboard.ReasonExpired, a.ID)
	in.ID = a.ID
	b := mustRegister(t, c, in)
	if b.Stale || !b.RegisteredAt.Equal(a.RegisteredAt) {
		t.Fatalf("re-registration: %+v (first %+v)", b, a)
	}
	ev := w.next(2)
	expect(t, ev, switchboard.EventAdded, "", a.ID)
	if ev.Instance.Stale {
		t.Fatalf("revived instance still stale: %+v", ev.Instance)
	}
}

func testWatchReap(t *testing.T, c switchboard.Catalog) {
	in := sample("reaped")
	in.TTL = time.Second
	w := watch(t, c, switchboard.Query{})
	all := watch(t, c, switchboard.Query{All: true})
	a := mustRegister(t, c, in)
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	expect(t, all.next(0), switchboard.EventAdded, "", a.ID)
	expect(t, w.next(1), switchboard.EventRemoved, switchboard.ReasonExpired, a.ID)
	ev := all.next(1)
	expect(t, ev, switchboard.EventUpdated, "", a.ID)
	if !ev.Instance.Stale {
		t.Fatal("All watcher: expiry is an update with stale=true")
	}
	testkit.WaitUntil(t, "reap", func() bool {
		n, err := c.Reap(ctx(t), 0)
		return err == nil && n == 1
	})
	expect(t, all.next(2), switchboard.EventRemoved, switchboard.ReasonExpired, a.ID)
	if w.count() != 2 {
		t.Fatalf("active watcher heard of the reap of an expired instance:%s", w.dump())
	}
}

func testConcurrentWriters(t *testing.T, c switchboard.Catalog) {
	const writers, each = 8, 25
	w := watch(t, c, switchboard.Query{})
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*3)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				in := sample(fmt.Sprintf("w%d", g), "cap")
				in.ID = fmt.Sprintf("w%d-%d", g, i)
				// Not the default TTL (10 s): on a loaded machine the
				// writes can take longer than that, and the first rows
				// would be stale, not listed, by the time of the List.
				in.TTL = 10 * time.Minute
				if _, err := c.Register(ctx(t), in); err != nil {
					errs <- err
					continue
				}
				if _, err := c.Heartbeat(ctx(t), in.ID); err != nil {
					errs <- err
				}
				if i%5 == 0 {
					if err := c.Deregister(ctx(t), in.ID); err != nil {
						errs <- err
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write: %v", err)
	}
	got, err := c.List(ctx(t), switchboard.Query{Capability: "cap"})
	if err != nil {
		t.Fatal(err)
	}
	want := writers * (each - each/5)
	if len(got) != want {
		t.Fatalf("have %d rows, want %d", len(got), want)
	}
	// The watcher converges on exactly the same set.
	testkit.WaitUntil(t, "watcher to converge", func() bool {
		live := map[string]bool{}
		w.mu.Lock()
		for _, ev := range w.events {
			switch ev.Kind {
			case switchboard.EventAdded:
				live[ev.Instance.ID] = true
			case switchboard.EventRemoved:
				delete(live, ev.Instance.ID)
			}
		}
		w.mu.Unlock()
		return len(live) == want
	})
}

func testClose(t *testing.T, c switchboard.Catalog) {
	w := watch(t, c, switchboard.Query{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	testkit.WaitUntil(t, "watch channel closed", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.closed
	})
	if _, err := c.Register(ctx(t), sample("late")); !errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("register after close: want ErrClosed, got %v", err)
	}
}

// testUnstorableKeys: an id, name, type or capability holding a NUL byte or
// invalid UTF-8 (text no backend stores, so no row has it) names nothing:
// Get and Deregister say ErrNotFound and List finds no row (or refuses
// the filter as ErrInvalid, as a server in front does) — never a storage
// error (PostgreSQL's encoding error), which a server in front would
// report as the catalog failing.
func testUnstorableKeys(t *testing.T, c switchboard.Catalog) {
	in := mustRegister(t, c, sample("keep", "cap"))
	for _, bad := range []string{"a\x00b", "a\xffb", "\x00", in.ID + "\x00"} {
		if _, err := c.Get(ctx(t), bad); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", bad, err)
		}
		if err := c.Deregister(ctx(t), bad); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("Deregister(%q): %v, want ErrNotFound", bad, err)
		}
		for _, q := range []switchboard.Query{{Name: bad}, {Type: bad}, {Capability: bad, All: true}} {
			got, err := c.List(ctx(t), q)
			if err != nil && !errors.Is(err, switchboard.ErrInvalid) || len(got) != 0 {
				t.Errorf("List(%+v) = %v, %v; want no rows or ErrInvalid", q, got, err)
			}
		}
	}
	if got, err := c.Get(ctx(t), in.ID); err != nil || got.ID != in.ID {
		t.Fatalf("the stored row: %+v %v", got, err)
	}
}
