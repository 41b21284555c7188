package switchboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

func service(name string) switchboard.Instance {
	return switchboard.Instance{Name: name, Type: switchboard.TypeQuerier, Address: "127.0.0.1:9000",
		Capabilities: []string{switchboard.CapQueryExecution}, TTL: time.Second}
}

func TestBootstrapReregistersWhenRowIsGone(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	reg, err := switchboard.Bootstrap(ctx, cat, service("q"), switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	// Someone deletes the row (an operator, a restored backup, a reaper
	// that ran during a partition).
	if err := cat.Deregister(ctx, reg.ID()); err != nil {
		t.Fatal(err)
	}
	// The row comes back before the counter moves (the counter counts a
	// write that succeeded), so wait for both.
	testkit.WaitUntil(t, "re-registration", func() bool {
		_, err := cat.Get(ctx, reg.ID())
		return err == nil && reg.Stats().Reregistrations >= 1
	})
	if s := reg.Stats(); s.Failures != 0 {
		t.Fatalf("stats: %+v", s)
	}
	got, _ := cat.Get(ctx, reg.ID())
	if got.Name != "q" || got.Address != "127.0.0.1:9000" {
		t.Fatalf("re-registered with other content: %+v", got)
	}
}

func TestBootstrapCloseDeregisters(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	reg, err := switchboard.Bootstrap(ctx, cat, service("q"), switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Get(ctx, reg.ID()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := cat.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("row after close: %v", err)
	}
	// No heartbeat brings it back.
	time.Sleep(150 * time.Millisecond)
	if _, err := cat.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("row came back after close: %v", err)
	}
}

func TestBootstrapContextEndDeregisters(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	reg, err := switchboard.Bootstrap(ctx, cat, service("q"), switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	testkit.WaitUntil(t, "deregistration on context end", func() bool {
		_, err := cat.Get(context.Background(), reg.ID())
		return errors.Is(err, switchboard.ErrNotFound)
	})
}

func TestBootstrapInvalidInputWritesNothing(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	bad := service("q")
	bad.Address = "no-port"
	if _, err := switchboard.Bootstrap(context.Background(), cat, bad, switchboard.BootstrapOptions{}); !errors.Is(err, switchboard.ErrInvalidAddress) {
		t.Fatalf("want ErrInvalidAddress, got %v", err)
	}
	if all, _ := cat.List(context.Background(), switchboard.Query{All: true}); len(all) != 0 {
		t.Fatalf("rows written: %+v", all)
	}
}

// writeCounter counts Register calls and, being a struct that embeds
// only the Catalog interface, hides the catalog's TTLDefaulter.
type writeCounter struct {
	switchboard.Catalog
	registers atomic.Int64
}

func (c *writeCounter) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	c.registers.Add(1)
	return c.Catalog.Register(ctx, in)
}

// tellingCatalog is a writeCounter that tells the default TTL of the
// catalog under it, or tell when set (a default the writes do not get).
type tellingCatalog struct {
	*writeCounter
	tell time.Duration
}

func (c tellingCatalog) DefaultTTL() time.Duration {
	if c.tell != 0 {
		return c.tell
	}
	return c.Catalog.(switchboard.TTLDefaulter).DefaultTTL()
}

// TestBootstrapRefusedKeepsWhatWasStored: a Bootstrap with the catalog's
// default TTL and a heartbeat interval too long for it is refused, and the
// row its id held before is kept, not deleted. A catalog that tells its
// default TTL (TTLDefaulter, as SQLite does) is not written at all; with
// one that does not, the check comes after the write, and the row is put
// back. So it is when the catalog told a default (10 s, which the
// heartbeat fits) that the write did not get (2 s, which it does not), as
// a remote catalog's servers behind one address may.
func TestBootstrapRefusedKeepsWhatWasStored(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hide      bool
		tell      time.Duration // the default told, when not the catalog's
		registers int64         // the Bootstrap's writes
	}{
		{"TTLDefaulter", false, 0, 0},
		{"default TTL unknown before the write", true, 0, 3},                     // stored, put back; stored, deleted
		{"told a default TTL the write did not get", false, 10 * time.Second, 3}, // the same
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sq, err := switchboard.Open(ctx, "sqlite://"+t.TempDir()+"/c.db",
				switchboard.Options{DefaultTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer sq.Close()
			if _, ok := sq.(switchboard.TTLDefaulter); !ok {
				t.Fatal("the SQLite catalog does not tell its default TTL")
			}
			counted := &writeCounter{Catalog: sq}
			var cat switchboard.Catalog = tellingCatalog{counted, tc.tell}
			if tc.hide {
				cat = counted
			}
			before := service("kept")
			before.ID, before.TTL, before.Version = "fixed", time.Hour, "1"
			if _, err := sq.Register(ctx, before); err != nil {
				t.Fatal(err)
			}
			again := service("other-name")
			again.ID, again.TTL, again.Version = "fixed", 0, "2" // the default TTL: 2 s
			if _, err := switchboard.Bootstrap(ctx, cat, again, switchboard.BootstrapOptions{HeartbeatInterval: 3 * time.Second}); !errors.Is(err, switchboard.ErrInvalid) ||
				!strings.Contains(err.Error(), "HeartbeatInterval") {
				t.Fatalf("Bootstrap with a heartbeat longer than half the default TTL: %v", err)
			}
			got, err := sq.Get(ctx, "fixed")
			if err != nil || got.Name != "kept" || got.TTL != time.Hour || got.Version != "1" {
				t.Fatalf("the row the id held before: %+v, %v", got, err)
			}
			// Without a row before, nothing is left behind.
			fresh := service("fresh")
			fresh.ID, fresh.TTL = "new-id", 0
			if _, err := switchboard.Bootstrap(ctx, cat, fresh, switchboard.BootstrapOptions{HeartbeatInterval: 3 * time.Second}); !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("Bootstrap: %v", err)
			}
			if _, err := sq.Get(ctx, "new-id"); !errors.Is(err, switchboard.ErrNotFound) {
				t.Fatalf("a refused Bootstrap left its row: %v", err)
			}
			if n := counted.registers.Load(); n != tc.registers {
				t.Fatalf("the refused Bootstraps wrote %d times, want %d", n, tc.registers)
			}
		})
	}
}

func TestStoppedHeartbeatExpires(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	ch, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	// The TTL is 60 heartbeat intervals: on a loaded machine a round can
	// stall for a second without the live instance expiring, while the
	// live one, registered first, would expire first if it stopped
	// heartbeating.
	const ttl = 3 * time.Second
	in := service("q")
	in.TTL = ttl
	reg, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	// Registered, then never heartbeating nor deregistering: what a crash
	// looks like.
	dead := service("crashed")
	dead.TTL = ttl
	stored, err := cat.Register(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		var ev switchboard.Event
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed before the crashed instance expired")
			}
			ev = e
		case <-timeout:
			t.Fatalf("the crashed instance did not expire within 30s (ttl %v)", ttl)
		}
		if ev.Kind != switchboard.EventRemoved {
			continue
		}
		if ev.Instance.ID == reg.ID() {
			t.Fatal("the heartbeating instance expired")
		}
		if ev.Instance.ID != stored.ID || ev.Reason != switchboard.ReasonExpired {
			t.Fatalf("unexpected removal %+v", ev)
		}
		// Never before its TTL is up (a lower bound cannot flake).
		if lag := time.Since(stored.LastSeen); lag < stored.TTL {
			t.Fatalf("expired after %v, before its TTL %v", lag, stored.TTL)
		}
		t.Logf("expired %v after its last heartbeat (ttl %v)", time.Since(stored.LastSeen), stored.TTL)
		break
	}
}

// countingCatalog counts heartbeat round trips and can fail them on demand.
type countingCatalog struct {
	switchboard.Catalog
	mu    sync.Mutex
	calls [][]string
	reaps int
	fail  error
	lists atomic.Int64
}

func (c *countingCatalog) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	c.lists.Add(1)
	return c.Catalog.List(ctx, q)
}

func (c *countingCatalog) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	c.mu.Lock()
	c.reaps++
	c.mu.Unlock()
	return c.Catalog.Reap(ctx, olderThan)
}

func (c *countingCatalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	c.mu.Lock()
	c.calls = append(c.calls, append([]string(nil), ids...))
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	return c.Catalog.Heartbeat(ctx, ids...)
}

func (c *countingCatalog) setFail(err error) {
	c.mu.Lock()
	c.fail = err
	c.mu.Unlock()
}

func TestBootstrapBatchesHeartbeats(t *testing.T) {
	cat := &countingCatalog{Catalog: testkit.OpenSQLite(t)}
	ctx := context.Background()
	var regs []*switchboard.Registration
	for i := 0; i < 8; i++ {
		reg, err := switchboard.Bootstrap(ctx, cat, service("svc"), switchboard.BootstrapOptions{HeartbeatInterval: 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	cat.mu.Lock()
	cat.calls = nil
	cat.mu.Unlock()
	testkit.WaitUntil(t, "5 heartbeat rounds", func() bool {
		cat.mu.Lock()
		defer cat.mu.Unlock()
		return len(cat.calls) >= 5
	})
	cat.mu.Lock()
	for i, ids := range cat.calls {
		if len(ids) != 8 {
			t.Errorf("round %d renewed %d ids in one call, want all 8", i, len(ids))
		}
	}
	cat.mu.Unlock()
	for _, r := range regs {
		r.Close()
		if s := r.Stats(); s.Failures != 0 || s.Heartbeats < 5 {
			t.Errorf("stats %+v", s)
		}
	}
}

// bulkCatalog stores registrations in memory and checks heartbeats as every
// backend does (backend.ValidateHeartbeatIDs), so that a test can hold more
// registrations than one Heartbeat call takes without writing 10,001 rows.
type bulkCatalog struct {
	switchboard.Catalog
	mu   sync.Mutex
	next int
	rows map[string]bool
}

func (c *bulkCatalog) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.rows = map[string]bool{}
	}
	c.next++
	in.ID = fmt.Sprintf("i-%d", c.next)
	c.rows[in.ID] = true
	return in, nil
}

func (c *bulkCatalog) Deregister(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.rows, id)
	return nil
}

func (c *bulkCatalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if err := backend.ValidateHeartbeatIDs(ids); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for _, id := range ids {
		if !c.rows[id] {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// A process with more registrations than one Heartbeat call takes renews
// them all, in calls under the limit.
func TestBootstrapChunksHeartbeatsUnderTheLimit(t *testing.T) {
	cat := &countingCatalog{Catalog: &bulkCatalog{Catalog: testkit.OpenSQLite(t)}}
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	n := switchboard.MaxHeartbeatIDs + 1
	regs := make([]*switchboard.Registration, 0, n)
	t.Cleanup(func() {
		for _, r := range regs {
			r.Close()
		}
	})
	in := service("svc")
	in.TTL = time.Minute
	for range n {
		r, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 500 * time.Millisecond, DisableReaper: true, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	testkit.WaitUntil(t, "every registration renewed", func() bool {
		for _, r := range regs {
			if r.Stats().Heartbeats == 0 {
				return false
			}
		}
		return true
	})
	cat.mu.Lock()
	defer cat.mu.Unlock()
	for i, ids := range cat.calls {
		if len(ids) > switchboard.MaxHeartbeatIDs {
			t.Errorf("call %d renewed %d ids, over the limit of %d", i, len(ids), switchboard.MaxHeartbeatIDs)
		}
	}
	for _, r := range regs {
		if s := r.Stats(); s.Failures != 0 {
			t.Fatalf("stats %+v", s)
		}
	}
}

func TestHeartbeatFailureEscalatesAfterTTL(t *testing.T) {
	cat := &countingCatalog{Catalog: testkit.OpenSQLite(t)}
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	in := service("q")
	in.TTL = 400 * time.Millisecond
	reg, err := switchboard.Bootstrap(context.Background(), cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	failedAt := time.Now()
	cat.setFail(errors.New("connection refused"))
	testkit.WaitUntil(t, "a WARN", func() bool { return strings.Contains(logs.String(), "level=WARN msg=\"heartbeat failed\"") })
	testkit.WaitUntil(t, "escalation to ERROR", func() bool { return strings.Contains(logs.String(), "level=ERROR") })
	if since := time.Since(failedAt); since < in.TTL {
		t.Fatalf("escalated after %v, before the TTL %v", since, in.TTL)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Fatalf("ERROR logged %d times, want once per outage:\n%s", n, logs)
	}
	cat.setFail(nil)
	testkit.WaitUntil(t, "recovery", func() bool { return strings.Contains(logs.String(), "heartbeat recovered") })
	if s := reg.Stats(); s.Failures == 0 {
		t.Fatalf("failures not counted: %+v", s)
	}
}

// The process's reaper runs while any registration on the catalog wants
// it, whichever registered first.
func TestReaperRunsWhileAnyRegistrationWantsIt(t *testing.T) {
	cat := &countingCatalog{Catalog: testkit.OpenSQLite(t)}
	ctx := context.Background()
	in := service("q")
	in.TTL = 100 * time.Millisecond
	opts := switchboard.BootstrapOptions{HeartbeatInterval: 20 * time.Millisecond}
	noReap := opts
	noReap.DisableReaper = true
	first, err := switchboard.Bootstrap(ctx, cat, in, noReap)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	time.Sleep(300 * time.Millisecond)
	cat.mu.Lock()
	before := cat.reaps
	cat.mu.Unlock()
	if before != 0 {
		t.Fatalf("reaper ran %d times with DisableReaper", before)
	}
	second, err := switchboard.Bootstrap(ctx, cat, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	testkit.WaitUntil(t, "the reaper to run", func() bool {
		cat.mu.Lock()
		defer cat.mu.Unlock()
		return cat.reaps > 0
	})
}

// The reaper's post-outage grace is per row. A process
// whose own registration has a TTL of an hour, after a failed heartbeat,
// still reaps a dead row with a short TTL once that row's own grace is over:
// through listing on a catalog that cannot reap by TTL, and in one call,
// never listing, on a GraceReaper.
func TestReaperGraceIsPerRow(t *testing.T) {
	for _, graceReaper := range []bool{false, true} {
		t.Run(map[bool]string{false: "listing", true: "GraceReaper"}[graceReaper], func(t *testing.T) {
			counting := &countingCatalog{Catalog: testkit.OpenSQLite(t)}
			var cat switchboard.Catalog = counting
			if graceReaper {
				cat = &graceCatalog{counting}
			}
			testReaperGrace(t, cat, counting)
			if graceReaper && counting.lists.Load() != 0 {
				t.Fatalf("the reaper listed a GraceReaper %d times", counting.lists.Load())
			}
		})
	}
}

func testReaperGrace(t *testing.T, cat switchboard.Catalog, counting *countingCatalog) {
	ctx := context.Background()
	long := service("long")
	long.TTL = time.Hour
	reg, err := switchboard.Bootstrap(ctx, cat, long, switchboard.BootstrapOptions{HeartbeatInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	dead := service("dead")
	dead.TTL = 100 * time.Millisecond
	stored, err := cat.Register(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	counting.setFail(errors.New("connection refused"))
	testkit.WaitUntil(t, "a failed heartbeat", func() bool { return reg.Stats().Failures > 0 })
	counting.setFail(nil)
	recovered := time.Now()
	testkit.WaitUntil(t, "the dead row (ttl 100ms) to be reaped", func() bool {
		_, err := cat.Get(ctx, stored.ID)
		return errors.Is(err, switchboard.ErrNotFound)
	})
	// Never inside its own grace (a lower bound cannot flake).
	if since := time.Since(recovered); since < dead.TTL {
		t.Fatalf("reaped %v after recovery, inside its grace of %v", since, dead.TTL)
	}
	if _, err := cat.Get(ctx, reg.ID()); err != nil {
		t.Fatalf("the live registration: %v", err)
	}
}

// graceCatalog is a countingCatalog that reaps with the grace in one call,
// as the SQL backends do.
type graceCatalog struct{ *countingCatalog }

func (g *graceCatalog) ReapGrace(ctx context.Context, reachableFor time.Duration) (int, error) {
	g.mu.Lock()
	g.reaps++
	g.mu.Unlock()
	return g.Catalog.(switchboard.GraceReaper).ReapGrace(ctx, reachableFor)
}

// labelled is a decorator a program might write: a value type, with a field
// that makes it not comparable (a slice), embedding the catalog it wraps.
type labelled struct {
	switchboard.Catalog
	labels []string
}

// Bootstrap must accept any Catalog, also one whose dynamic type cannot be
// a map key (it keyed its shared heartbeat loops by the catalog and
// panicked with "hash of unhashable type"); registrations on such a catalog
// heartbeat each on their own loop.
func TestBootstrapNonComparableCatalog(t *testing.T) {
	base := testkit.OpenSQLite(t)
	var cat switchboard.Catalog = labelled{Catalog: base, labels: []string{"x"}}
	ctx := context.Background()
	opts := switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	var regs []*switchboard.Registration
	for _, name := range []string{"a", "b"} {
		reg, err := switchboard.Bootstrap(ctx, cat, service(name), opts)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg)
	}
	if err := base.Deregister(ctx, regs[1].ID()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "heartbeats and a re-registration", func() bool {
		_, err := base.Get(ctx, regs[1].ID())
		return err == nil && regs[0].Stats().Heartbeats >= 2 && regs[1].Stats().Reregistrations >= 1
	})
	for _, reg := range regs {
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := base.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("after Close: %v", err)
		}
	}
}

// hangingCatalog blocks Heartbeat (and, with hangRegister, Register) until
// the caller's context ends, once told to: a catalog that stopped
// answering. entered receives each blocked call.
type hangingCatalog struct {
	switchboard.Catalog
	hang, hangRegister atomic.Bool
	entered            chan string
}

func (c *hangingCatalog) block(ctx context.Context, what string) error {
	select {
	case c.entered <- what:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

func (c *hangingCatalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if c.hang.Load() {
		return nil, c.block(ctx, "heartbeat")
	}
	if c.hangRegister.Load() {
		return ids, nil // every row missing: the loop registers them again
	}
	return c.Catalog.Heartbeat(ctx, ids...)
}

func (c *hangingCatalog) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	if c.hangRegister.Load() {
		return switchboard.Instance{}, c.block(ctx, "register")
	}
	return c.Catalog.Register(ctx, in)
}

// closeWithin closes reg and fails the test if Close has not returned
// after a minute: a heartbeat round of a one-hour TTL waits up to 30 min.
func closeWithin(t *testing.T, reg *switchboard.Registration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- reg.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close waited for a heartbeat stuck on an unresponsive catalog")
	}
}

// Close does not wait for a heartbeat (or a re-registration) stuck on an
// unresponsive catalog, whose deadline is half the TTL: it cancels it, or,
// while other registrations share the loop, leaves it to them, and deletes
// the row.
func TestBootstrapCloseDoesNotWaitForAStuckHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool // another registration stays on the loop
		stuck  string
	}{
		{"last registration, heartbeat", false, "heartbeat"},
		{"shared loop, heartbeat", true, "heartbeat"},
		{"last registration, re-registration", false, "register"},
		{"shared loop, re-registration", true, "register"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := testkit.OpenSQLite(t)
			cat := &hangingCatalog{Catalog: base, entered: make(chan string, 1)}
			ctx := context.Background()
			opts := switchboard.BootstrapOptions{HeartbeatInterval: switchboard.MinHeartbeatInterval, DisableReaper: true,
				Logger: slog.New(slog.DiscardHandler)}
			in := service("stuck")
			in.TTL = time.Hour
			reg, err := switchboard.Bootstrap(ctx, cat, in, opts)
			if err != nil {
				t.Fatal(err)
			}
			var other *switchboard.Registration
			if tc.shared {
				if other, err = switchboard.Bootstrap(ctx, cat, service("other"), opts); err != nil {
					t.Fatal(err)
				}
			}
			if tc.stuck == "heartbeat" {
				cat.hang.Store(true)
			} else {
				cat.hangRegister.Store(true)
			}
			select {
			case what := <-cat.entered:
				if what != tc.stuck {
					t.Fatalf("stuck in %s, want %s", what, tc.stuck)
				}
			case <-time.After(time.Minute):
				t.Fatalf("no %s reached the catalog", tc.stuck)
			}
			closeWithin(t, reg)
			if _, err := base.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
				t.Fatalf("after Close: %v", err)
			}
			if other != nil {
				closeWithin(t, other)
			}
		})
	}
}

// failingDeregister refuses every deregistration.
type failingDeregister struct{ switchboard.Catalog }

func (failingDeregister) Deregister(context.Context, string) error {
	return errors.New("catalog unreachable")
}

// A Close whose deletion fails returns the error and logs it at WARN: it
// does not log "deregistered" for a row that stays until it expires.
func TestBootstrapCloseLogsAFailedDeregistration(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	cat := failingDeregister{testkit.OpenSQLite(t)}
	reg, err := switchboard.Bootstrap(context.Background(), cat, service("q"),
		switchboard.BootstrapOptions{HeartbeatInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Close(); err == nil || !strings.Contains(err.Error(), "catalog unreachable") {
		t.Fatalf("Close: %v", err)
	}
	if out := logs.String(); strings.Contains(out, "msg=deregistered") || !strings.Contains(out, "level=WARN msg=\"deregistering failed") {
		t.Fatalf("logs:\n%s", out)
	}
}
