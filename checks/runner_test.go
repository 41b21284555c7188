package checks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &testDSN)) }

var quiet = slog.New(slog.DiscardHandler)

// openDSN opens a handle on the catalog dsn, closed at cleanup.
func openDSN(t *testing.T, dsn string) switchboard.Catalog {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// sqliteDSN is a new SQLite file's DSN.
func sqliteDSN(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "catalog.db") }

// setCall is one SetHealth a runner made.
type setCall struct {
	id     string
	health switchboard.Health
	// served is what the target had answered when the call came.
	served map[string]int64
}

// recorder wraps a catalog to record the runner's SetHealth calls and
// Deregisters, and can be cut off (every call of the runner fails, as for
// a process partitioned from the catalog) to simulate a killed runner
// that cannot give its leases back.
type recorder struct {
	switchboard.Catalog
	mu     sync.Mutex
	calls  []setCall
	target *target
	cut    atomic.Bool
}

var errCut = errors.New("cut off from the catalog")

func (r *recorder) SetHealth(ctx context.Context, id string, h switchboard.Health) (switchboard.Instance, error) {
	if r.cut.Load() {
		<-ctx.Done()
		return switchboard.Instance{}, ctx.Err()
	}
	in, err := r.Catalog.(switchboard.HealthSetter).SetHealth(ctx, id, h)
	if err == nil {
		r.mu.Lock()
		c := setCall{id: id, health: h}
		if r.target != nil {
			c.served = r.target.counts()
		}
		r.calls = append(r.calls, c)
		r.mu.Unlock()
	}
	return in, err
}

func (r *recorder) setCalls() []setCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]setCall(nil), r.calls...)
}

func (r *recorder) leaser() switchboard.Leaser { return r.Catalog.(switchboard.Leaser) }

func (r *recorder) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if r.cut.Load() {
		return switchboard.Lease{}, errCut
	}
	return r.leaser().Acquire(ctx, name, holder, ttl)
}

func (r *recorder) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if r.cut.Load() {
		return switchboard.Lease{}, errCut
	}
	return r.leaser().Renew(ctx, l)
}

func (r *recorder) Release(ctx context.Context, l switchboard.Lease) error {
	if r.cut.Load() {
		return errCut
	}
	return r.leaser().Release(ctx, l)
}

func (r *recorder) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	if r.cut.Load() {
		return nil, errCut
	}
	return r.leaser().Leases(ctx)
}

func (r *recorder) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if r.cut.Load() {
		return nil, errCut
	}
	return r.Catalog.Heartbeat(ctx, ids...)
}

func (r *recorder) Now(ctx context.Context) (time.Time, error) {
	if r.cut.Load() {
		return time.Time{}, errCut
	}
	return r.Catalog.Now(ctx)
}

// target is an HTTP server whose answer the test sets, counting the probes
// it serves by mode and by path.
type target struct {
	srv    *httptest.Server
	mu     sync.Mutex
	code   int
	served map[string]int64 // by mode: "200", "500", "429"
	paths  map[string]int64
}

func newTarget(t *testing.T) *target {
	tg := &target{code: 200, served: map[string]int64{}, paths: map[string]int64{}}
	tg.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.mu.Lock()
		code := tg.code
		tg.served[fmt.Sprint(code)]++
		tg.paths[r.URL.Path]++
		tg.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) set(code int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.code = code
}

func (tg *target) counts() map[string]int64 {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.served)
}

func (tg *target) pathCounts() map[string]int64 {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.paths)
}

// addr is the target's host:port.
func (tg *target) addr() string { return strings.TrimPrefix(tg.srv.URL, "http://") }

// run runs a runner of cat until the test ends (or its stop is called).
func run(t *testing.T, cat switchboard.Catalog, opts Options) (r *Runner, stop func()) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	r, err := New(cat, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

func register(t *testing.T, cat switchboard.Catalog, in switchboard.Instance) switchboard.Instance {
	t.Helper()
	in.Type = "test"
	out, err := cat.Register(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunnerTransitions: a new checked row starts critical; the runner
// sets it passing after Successes good probes, critical after Failures
// failed ones, warning (from critical, after Successes) when the target
// answers 429, passing again at once from warning; it writes only these
// changes, and watchers see them.
func TestRunnerTransitions(t *testing.T) {
	tg := newTarget(t)
	rec := &recorder{Catalog: testkit.OpenSQLite(t), target: tg}
	ctx := context.Background()
	in := register(t, rec, switchboard.Instance{ID: "web-1", Name: "web", Address: tg.addr(),
		Check: &switchboard.Check{Target: tg.srv.URL + "/health", Interval: time.Second, Failures: 2, Successes: 2}})
	if in.Health.Status != switchboard.StatusCritical {
		t.Fatalf("a new checked row's health is %+v, want critical until checked", in.Health)
	}
	events, err := rec.Watch(ctx, switchboard.Query{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	run(t, rec, Options{Metrics: m, LeaseTTL: 3 * time.Second})

	waitCalls := func(n int) []setCall {
		t.Helper()
		testkit.WaitUntil(t, fmt.Sprintf("%d status changes", n), func() bool { return len(rec.setCalls()) >= n })
		return rec.setCalls()
	}
	want := func(c setCall, status switchboard.Status, mode string, atLeast int64, output string) {
		t.Helper()
		if c.health.Status != status || !strings.Contains(c.health.Output, output) {
			t.Errorf("status change to %s (%q), want %s (%q)", c.health.Status, c.health.Output, status, output)
		}
		if c.served[mode] < atLeast {
			t.Errorf("changed to %s after %d probes answered %s, want at least %d", status, c.served[mode], mode, atLeast)
		}
	}
	want(waitCalls(1)[0], switchboard.StatusPassing, "200", 2, "200 OK")
	nextEvent(t, events, switchboard.EventAdded, "")

	tg.set(500)
	want(waitCalls(2)[1], switchboard.StatusCritical, "500", 2, "500 Internal Server Error")
	ev := nextEvent(t, events, switchboard.EventRemoved, switchboard.ReasonCheckFailed)
	if !strings.Contains(ev.Instance.Health.Output, "500") {
		t.Errorf("removed with health %+v, want the output of the failing probe", ev.Instance.Health)
	}

	tg.set(429)
	want(waitCalls(3)[2], switchboard.StatusWarning, "429", 2, "429")
	nextEvent(t, events, switchboard.EventAdded, "")

	tg.set(200)
	calls := waitCalls(4)
	want(calls[3], switchboard.StatusPassing, "200", 1, "200")
	got, err := rec.Get(ctx, "web-1")
	if err != nil || got.Health.Status != switchboard.StatusPassing || !got.Serving() {
		t.Errorf("Get = %+v, %v; want passing and serving", got.Health, err)
	}

	// Probes that change nothing write nothing.
	served := tg.counts()["200"]
	testkit.WaitUntil(t, "three more probes", func() bool { return tg.counts()["200"] >= served+3 })
	if n := len(rec.setCalls()); n != 4 {
		t.Errorf("%d status changes recorded, want 4 (only changes are written): %+v", n, rec.setCalls())
	}
	if n := counterValue(t, m.changes.WithLabelValues("http", "critical")); n != 1 {
		t.Errorf("switchboard_check_status_changes_total{kind=http,status=critical} = %v, want 1", n)
	}
	if n := counterValue(t, m.failures.WithLabelValues("http")); n < 2 {
		t.Errorf("switchboard_check_failures_total{kind=http} = %v, want at least 2", n)
	}
}

func nextEvent(t *testing.T, events <-chan switchboard.Event, kind switchboard.EventKind, reason switchboard.Reason) switchboard.Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == switchboard.EventSynced {
				continue
			}
			if ev.Kind != kind || ev.Reason != reason {
				t.Fatalf("event %s (%s) of %s, want %s (%s)", ev.Kind, ev.Reason, ev.Instance.ID, kind, reason)
			}
			return ev
		case <-deadline:
			t.Fatalf("no %s event", kind)
		}
	}
}

// TestRunnerDeregisterAfter: a row critical for DeregisterAfter is
// deleted.
func TestRunnerDeregisterAfter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every probe fails
	cat := testkit.OpenSQLite(t)
	register(t, cat, switchboard.Instance{ID: "gone-1", Name: "gone", Address: addr,
		Check: &switchboard.Check{Target: "tcp://" + addr, Interval: time.Second, Failures: 1, DeregisterAfter: 2 * time.Second}})
	events, err := cat.Watch(context.Background(), switchboard.Query{All: true, Name: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, cat, Options{LeaseTTL: 3 * time.Second})
	deadline := time.After(time.Minute)
wait:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the watch ended before the row was removed")
			}
			if ev.Kind == switchboard.EventRemoved {
				if ev.Reason != switchboard.ReasonCheckCritical {
					t.Errorf("removed with reason %q, want %q", ev.Reason, switchboard.ReasonCheckCritical)
				}
				break wait
			}
		case <-deadline:
			t.Fatal("the row critical past its deregister_after was not removed within a minute")
		}
	}
	if _, err := cat.Get(context.Background(), "gone-1"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("Get after deregister_after = %v, want ErrNotFound", err)
	}
}

// TestRunnerCheckOnly: a row marked MetadataCheckOnly stays alive past
// its TTL while its check runs; one without the mark (whose registrant
// does not heartbeat) goes stale though its check passes.
func TestRunnerCheckOnly(t *testing.T) {
	tg := newTarget(t)
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	check := &switchboard.Check{Target: tg.srv.URL + "/", Interval: time.Second}
	register(t, cat, switchboard.Instance{ID: "only-1", Name: "db", Address: tg.addr(), TTL: time.Second,
		Metadata: map[string]string{MetadataCheckOnly: "true"}, Check: check})
	register(t, cat, switchboard.Instance{ID: "both-1", Name: "db", Address: tg.addr(), TTL: time.Second, Check: check})
	run(t, cat, Options{LeaseTTL: 3 * time.Second})
	testkit.WaitUntil(t, "the row without heartbeats to go stale", func() bool {
		in, err := cat.Get(ctx, "both-1")
		return err == nil && in.Stale
	})
	// Three TTLs after registering, the check-only row is still fresh.
	only, _ := cat.Get(ctx, "only-1")
	for time.Since(only.RegisteredAt) < 3*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	only, err := cat.Get(ctx, "only-1")
	if err != nil || only.Stale || only.Health.Status != switchboard.StatusPassing {
		t.Errorf("check-only row: %+v, %v; want fresh and passing", only, err)
	}
}

// TestRunnerCheckOnlyChanges: a re-registration with the same check keeps
// its loop, and what it says of the mark is followed: without it the row
// is no longer renewed (it goes stale), with it again the row is renewed
// again.
func TestRunnerCheckOnlyChanges(t *testing.T) {
	tg := newTarget(t)
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	in := switchboard.Instance{ID: "flip-1", Name: "db", Address: tg.addr(), TTL: time.Second,
		Metadata: map[string]string{MetadataCheckOnly: "true"}, Check: &switchboard.Check{Target: tg.srv.URL + "/", Interval: time.Second}}
	register(t, cat, in)
	run(t, cat, Options{LeaseTTL: 3 * time.Second})
	testkit.WaitUntil(t, "the check-only row to pass", func() bool {
		got, err := cat.Get(ctx, "flip-1")
		return err == nil && got.Health.Status == switchboard.StatusPassing
	})
	in.Metadata = nil
	register(t, cat, in)
	testkit.WaitUntil(t, "the row without the mark to go stale", func() bool {
		got, err := cat.Get(ctx, "flip-1")
		return err == nil && got.Stale
	})
	in.Metadata = map[string]string{MetadataCheckOnly: "true"}
	again := register(t, cat, in)
	testkit.WaitUntil(t, "the row marked again to be renewed by the runner", func() bool {
		got, err := cat.Get(ctx, "flip-1")
		return err == nil && got.LastSeen.After(again.LastSeen) && !got.Stale
	})
}

// TestRunnerPolicy: a check the runner's policy refuses is not probed; the
// instance is critical and says why.
func TestRunnerPolicy(t *testing.T) {
	tg := newTarget(t)
	cat := testkit.OpenSQLite(t)
	// The target is on 127.0.0.1, the instance's address elsewhere.
	register(t, cat, switchboard.Instance{ID: "x-1", Name: "x", Address: "10.9.9.9:80",
		Check: &switchboard.Check{Target: tg.srv.URL + "/", Interval: time.Second}})
	register(t, cat, switchboard.Instance{ID: "x-2", Name: "x", Address: tg.addr(),
		Check: &switchboard.Check{Target: tg.srv.URL + "/ok", Interval: time.Second}})
	run(t, cat, Options{LeaseTTL: 3 * time.Second})
	testkit.WaitUntil(t, "the allowed check to pass", func() bool {
		in, err := cat.Get(context.Background(), "x-2")
		return err == nil && in.Health.Status == switchboard.StatusPassing
	})
	testkit.WaitUntil(t, "the refused check to say why", func() bool {
		in, err := cat.Get(context.Background(), "x-1")
		return err == nil && strings.Contains(in.Health.Output, "not probed") && strings.Contains(in.Health.Output, "checks.allow")
	})
	in, _ := cat.Get(context.Background(), "x-1")
	if in.Health.Status != switchboard.StatusCritical || tg.pathCounts()["/"] != 0 {
		t.Errorf("refused check: %+v, %d probes; want critical and none", in.Health, tg.pathCounts()["/"])
	}
}

// probeLog records every probe of every runner.
type probeLog struct {
	mu     sync.Mutex
	probes []probeRec
}

type probeRec struct {
	runner, id string
	start, end time.Time
}

func (p *probeLog) hook(identity, id string, start, end time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes = append(p.probes, probeRec{identity, id, start, end})
}

func (p *probeLog) since(t time.Time) []probeRec {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []probeRec
	for _, r := range p.probes {
		if !r.start.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// noOverlap fails the test when two runners' probes of one check overlap
// in time, or a runner probed a check after another had started probing
// it and before that other stopped (a check run twice).
func (p *probeLog) noOverlap(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	byID := map[string][]probeRec{}
	for _, r := range p.probes {
		byID[r.id] = append(byID[r.id], r)
	}
	for id, rs := range byID {
		sort.Slice(rs, func(a, b int) bool { return rs[a].start.Before(rs[b].start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].runner != rs[i-1].runner && rs[i].start.Before(rs[i-1].end) {
				t.Errorf("check %s: %s probed at %s while %s's probe ran until %s", id, rs[i].runner,
					rs[i].start.Format("15:04:05.000"), rs[i-1].runner, rs[i-1].end.Format("15:04:05.000"))
			}
		}
		// Once a runner has handed a check over, it does not probe it
		// again while the other holds it: runners alternate at most as
		// often as the shard changes hands (here: once).
		switches := 0
		for i := 1; i < len(rs); i++ {
			if rs[i].runner != rs[i-1].runner {
				switches++
			}
		}
		if switches > 2 {
			t.Errorf("check %s changed runners %d times: %v", id, switches, rs)
		}
	}
}

// testShards is the shard count of the two-runner tests: fewer than the
// default, so that their lease renewals (short TTLs) keep within what a
// SQLite file on a busy machine writes.
const testShards = 16

// twoRunners sets up n checked instances on the catalog dsn and two
// runners, each on its own handle (as two servers would be).
func twoRunners(t *testing.T, dsn string, n int, ttl time.Duration) (tg *target, log *probeLog, a, b *Runner, recA *recorder, stopA func()) {
	tg = newTarget(t)
	setup := openDSN(t, dsn)
	for i := range n {
		register(t, setup, switchboard.Instance{ID: fmt.Sprintf("svc-%02d", i), Name: "svc", Address: tg.addr(),
			Check: &switchboard.Check{Target: fmt.Sprintf("%s/%02d", tg.srv.URL, i), Interval: time.Second}})
	}
	log = &probeLog{}
	recA = &recorder{Catalog: openDSN(t, dsn)}
	a, stopA = run(t, recA, Options{Identity: "runner-a", Shards: testShards, LeaseTTL: ttl, probed: log.hook})
	b, _ = run(t, openDSN(t, dsn), Options{Identity: "runner-b", Shards: testShards, LeaseTTL: ttl, probed: log.hook})
	testkit.WaitUntil(t, "the runners to hold half the shards each", func() bool {
		return len(a.Shards()) == testShards/2 && len(b.Shards()) == testShards/2
	})
	return tg, log, a, b, recA, stopA
}

// probedBy waits until every check has been probed at least k times since
// from, and returns the runners that probed each.
func probedBy(t *testing.T, log *probeLog, n, k int, from time.Time) map[string]map[string]int {
	t.Helper()
	var by map[string]map[string]int
	testkit.WaitUntil(t, fmt.Sprintf("every check probed %d times", k), func() bool {
		by = map[string]map[string]int{}
		for _, r := range log.since(from) {
			if by[r.id] == nil {
				by[r.id] = map[string]int{}
			}
			by[r.id][r.runner]++
		}
		if len(by) < n {
			return false
		}
		for _, runners := range by {
			total := 0
			for _, c := range runners {
				total += c
			}
			if total < k {
				return false
			}
		}
		return true
	})
	return by
}

// TestTwoRunnersShare: two runners on one catalog (a SQLite file, a
// PostgreSQL schema) split the shards; each check is probed by exactly one
// of them (the target counts the probes the runners say they made); when
// one stops, the other takes its checks.
func TestTwoRunnersShare(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { twoRunnersShare(t, sqliteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { twoRunnersShare(t, pgtest.Schema(t, testDSN)) })
}

func twoRunnersShare(t *testing.T, dsn string) {
	const n = 24
	tg, log, a, b, _, stopA := twoRunners(t, dsn, n, 3*time.Second)
	before := tg.pathCounts()
	from := time.Now()
	by := probedBy(t, log, n, 3, from)
	after := tg.pathCounts()
	owners := map[string]int{}
	for id, runners := range by {
		if len(runners) != 1 {
			t.Errorf("check %s probed by %v, want one runner", id, runners)
		}
		for r := range runners {
			owners[r]++
		}
	}
	t.Logf("checks per runner: %v; a holds %d shards, b %d", owners, len(a.Shards()), len(b.Shards()))
	// The targets count no more probes than the runners made: none ran
	// twice, none unrecorded. (Probes still under way when the counts were
	// read may be in one count and not the other: a margin of one per
	// check.)
	made := map[string]int{}
	for _, r := range log.since(from) {
		made[r.id]++
	}
	for i := range n {
		id, path := fmt.Sprintf("svc-%02d", i), fmt.Sprintf("/%02d", i)
		served := int(after[path] - before[path])
		if d := served - made[id]; d < -1 || d > 1 {
			t.Errorf("check %s: the target served %d probes in the window, the runners made %d", id, served, made[id])
		}
	}

	stopped := time.Now()
	stopA()
	testkit.WaitUntil(t, "the other runner to take every shard", func() bool { return len(b.Shards()) == testShards })
	t.Logf("runner b held every shard %s after runner a stopped (lease TTL 3s)", time.Since(stopped).Round(time.Millisecond))
	by = probedBy(t, log, n, 2, time.Now())
	for id, runners := range by {
		if len(runners) != 1 || runners["runner-b"] == 0 {
			t.Errorf("after runner a stopped, check %s probed by %v, want runner-b alone", id, runners)
		}
	}
	log.noOverlap(t)
}

// TestRunnerCutOff: a runner cut off from the catalog (it can reach the
// targets, not the catalog; it cannot give its leases back, as a killed
// one cannot) stops probing before its leases could expire, and the other
// takes its checks once they have: no check is probed by both at once.
func TestRunnerCutOff(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { runnerCutOff(t, sqliteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { runnerCutOff(t, pgtest.Schema(t, testDSN)) })
}

func runnerCutOff(t *testing.T, dsn string) {
	const n = 24
	_, log, a, b, recA, _ := twoRunners(t, dsn, n, 3*time.Second)
	probedBy(t, log, n, 2, time.Now())
	cut := time.Now()
	recA.cut.Store(true)
	testkit.WaitUntil(t, "the cut-off runner to stop probing", func() bool { return idle(a) })
	testkit.WaitUntil(t, "the other runner to take every shard", func() bool { return len(b.Shards()) == testShards })
	t.Logf("runner b held every shard %s after runner a was cut off (lease TTL 3s)", time.Since(cut).Round(time.Millisecond))
	by := probedBy(t, log, n, 2, time.Now())
	for id, runners := range by {
		if len(runners) != 1 || runners["runner-b"] == 0 {
			t.Errorf("after runner a was cut off, check %s probed by %v, want runner-b alone", id, runners)
		}
	}
	log.noOverlap(t)
}

// idle reports whether no shard of r may be probed now.
func idle(r *Runner) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.owned {
		if r.holds(i) {
			return false
		}
	}
	return true
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
