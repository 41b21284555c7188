package main

// The checks part (-parts checks): -checks-instances check-only instances
// registered through `switchboard serve`'s HTTP API, each with an HTTP
// check at -checks-interval of a target in this process (checks_targets.go),
// on a fresh PostgreSQL database, run by one server and then by two on the
// same database. For each, once every check passes (and, with two, once
// the shards have settled), it measures for -checks-window
//
//   - the serve processes' CPU (from /proc: getrusage-like figures, which
//     a loaded host does not inflate), PostgreSQL's backends' and this
//     process's own (the targets and the watcher);
//   - the probes a second the targets served, and the herd: the busiest
//     100 ms of the window over the mean 100 ms (and the 99th percentile
//     100 ms, and this process's longest pause: a host that holds the
//     targets or a server up for a while makes a burst when it lets go);
//   - whether each check ran on one runner only (judgeOnce);
//   - detection: -checks-failing targets turned failing (HTTP 500) at
//     times spread over the window, and when a watcher through the first
//     server sees each instance removed with reason check_failed.
//
// Consul cannot be measured beside it here (checksConsulNote).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/checks"
)

// checksShape is what the checks part measures.
type checksShape struct {
	instances int
	interval  time.Duration
	window    time.Duration
	failing   int           // targets turned failing in each column
	ttl       time.Duration // the rows' TTL (0: the server's default)
}

const (
	// checksFailures is the checks' Failures: failed probes in a row that
	// make an instance critical.
	checksFailures = 3
	// checksListeners is how many loopback ports the targets listen on:
	// every probe is a new connection, and spread over several ports the
	// connections the side that closes first leaves in TIME_WAIT (unless
	// it resets them, as Switchboard's prober does) reuse no port pair
	// soon.
	checksListeners = 16
)

// checksConsulNote says why Consul has no figures beside Switchboard's.
const checksConsulNote = "not measured here. No Consul server can run on this host: Consul (under the BSL " +
	"licence) is not in Debian's archive, and its server cannot be fetched or built here otherwise; no figure " +
	"of Consul is given"

// checksColumn is one column: one or two servers.
type checksColumn struct {
	servers            int
	shards, running    []int     // per server, at the window's start
	serveCores         []float64 // per server
	pgCores, selfCores float64
	probes             int64 // in the window
	probesPerSec       float64
	busiest, quietest  float64 // 100 ms buckets over the mean
	p99Bucket          float64 // the 99th percentile 100 ms bucket over the mean
	pause              float64 // ms: the harness's longest pause in the window
	once               onceStats
	failedProbes       float64 // the runners' failed probes in the window
	served500          int64   // the targets' 500s in the window
	detect             []float64
	propagate          []float64 // ms: the failures-th failing probe → removed at the watcher
	missing            int       // failing targets not seen removed
	wrong              map[string]int
}

// checksResult is the checks part's table.
type checksResult struct {
	shape              checksShape
	pgVersion          string
	register           time.Duration // the instances' registrations through the API
	ready              time.Duration // the last registration → every instance passing at the watcher
	settle             time.Duration // the second server's start → the shards settled
	one, two           checksColumn
	started, ended     time.Time
	loadStart, loadEnd string
}

// checkServe is one `switchboard serve` with checks on.
type checkServe struct {
	url  string
	pid  int
	stop func()
}

func startCheckServe(bin, dsn string) (*checkServe, error) {
	st, pids, stop, err := startServer(exec.Command(bin, "--dsn", dsn, "serve", "--listen", "127.0.0.1:0", "--checks"),
		"switchboard", func() []int { return nil }, func() {})
	if err != nil {
		return nil, err
	}
	return &checkServe{url: st.DSN, pid: pids()[0], stop: stop}, nil
}

// Metric names scraped from each server.
const (
	metricShards   = "switchboard_check_shards_held"
	metricRunning  = "switchboard_checks_running"
	metricFailures = `switchboard_check_failures_total{kind="http"}`
)

// scrape reads a server's check metrics.
func (s *checkServe) scrape(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", s.url, resp.Status)
	}
	return metricsOf(resp.Body, metricShards, metricRunning, metricFailures)
}

// checkID is check i's instance id; checkIndex reads it back (-1: not one
// of the harness's).
func checkID(i int) string { return fmt.Sprintf("chk-%05d", i) }

func checkIndex(id string) int {
	s, ok := strings.CutPrefix(id, "chk-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return i
}

// checkWatcher is a user's watch of the catalog through a server: which
// instances are discovered, and when the failing ones leave.
type checkWatcher struct {
	tg   *checkTargets
	live atomic.Int64

	mu        sync.Mutex
	in        map[int]bool
	pending   map[int]bool // failing checks not seen removed yet
	detect    []float64    // s
	propagate []float64    // ms
	wrong     map[string]int
}

func watchChecks(ctx context.Context, cat switchboard.Catalog, tg *checkTargets) (*checkWatcher, error) {
	events, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		return nil, err
	}
	w := &checkWatcher{tg: tg, in: map[int]bool{}, pending: map[int]bool{}, wrong: map[string]int{}}
	go func() {
		for ev := range events {
			w.event(ev)
		}
	}()
	return w, nil
}

func (w *checkWatcher) event(ev switchboard.Event) {
	if ev.Kind == switchboard.EventError {
		log.Printf("checks: the watcher: %v", ev.Err)
		return
	}
	i := checkIndex(ev.Instance.ID)
	if i < 0 || ev.Kind != switchboard.EventAdded && ev.Kind != switchboard.EventRemoved {
		return
	}
	now := w.tg.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Kind == switchboard.EventAdded {
		if !w.in[i] {
			w.in[i] = true
			w.live.Add(1)
		}
		return
	}
	if w.in[i] {
		delete(w.in, i)
		w.live.Add(-1)
	}
	since := w.tg.failSince[i].Load()
	if w.pending[i] && since != 0 && ev.Reason == switchboard.ReasonCheckFailed {
		delete(w.pending, i)
		w.detect = append(w.detect, time.Duration(now-since).Seconds())
		if last := w.tg.lastFail[i].Load(); last != 0 {
			w.propagate = append(w.propagate, float64(now-last)/float64(time.Millisecond))
		}
		return
	}
	if since == 0 {
		w.wrong[string(ev.Reason)]++
	}
}

// begin starts a column: its wrong removals are counted from now on.
func (w *checkWatcher) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wrong = map[string]int{}
}

// expect sets the checks about to fail, whose removals are timed.
func (w *checkWatcher) expect(failing []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending, w.detect, w.propagate = map[int]bool{}, nil, nil
	for _, i := range failing {
		w.pending[i] = true
	}
}

func (w *checkWatcher) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// waitFor polls cond every 200 ms until it holds, or fails after timeout
// saying what.
func waitFor(ctx context.Context, timeout time.Duration, what func() string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", timeout, what())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// checksRun is one run of the part.
type checksRun struct {
	shape checksShape
	pg    *pgServer
	db    string
	tg    *checkTargets
	w     *checkWatcher
	p     pauses
}

// measureChecks runs the checks part.
func measureChecks(ctx context.Context, sbBin string, shape checksShape) (*checksResult, error) {
	res := &checksResult{shape: shape, started: time.Now().UTC(), loadStart: loadAvg()}
	pg, err := connectPG(ctx)
	if err != nil {
		return nil, err
	}
	defer pg.admin.Close(context.Background())
	_ = pg.admin.QueryRow(ctx, `SHOW server_version`).Scan(&res.pgVersion)
	tg, err := startTargets(shape.instances, checksListeners, checksFailures, shape.window)
	if err != nil {
		return nil, err
	}
	defer tg.close()
	dsn, db, drop, err := pg.database(ctx)
	if err != nil {
		return nil, err
	}
	defer drop() // after the servers have stopped (deferred later, run first)
	r := &checksRun{shape: shape, pg: pg, db: db, tg: tg}
	pctx, stopPauses := context.WithCancel(ctx)
	defer stopPauses()
	go r.p.run(pctx, tg.base)

	log.Printf("checks: starting serve with checks (%s)", sbBin)
	one, err := startCheckServe(sbBin, dsn)
	if err != nil {
		return nil, err
	}
	defer one.stop()
	cat, err := switchboard.Open(ctx, one.url, switchboard.Options{Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if r.w, err = watchChecks(wctx, cat, tg); err != nil {
		return nil, err
	}
	r.w.begin()

	log.Printf("checks: registering %d check-only instances through the API, HTTP checks at %s", shape.instances, shape.interval)
	start := time.Now()
	if err := registerChecks(ctx, cat, tg, shape); err != nil {
		return nil, err
	}
	res.register = time.Since(start)
	start = time.Now()
	if err := r.settle(ctx, []*checkServe{one}, 3*time.Minute); err != nil {
		return nil, err
	}
	res.ready = time.Since(start)
	log.Printf("checks: registered in %.1f s; every check passing %.1f s later", res.register.Seconds(), res.ready.Seconds())

	perm := rand.Perm(shape.instances)
	log.Printf("checks: one server: %s measured, %d targets failing", shape.window, shape.failing)
	if res.one, err = r.column(ctx, []*checkServe{one}, perm[:shape.failing]); err != nil {
		return nil, err
	}
	r.logColumn(res.one)

	r.w.begin()
	for _, i := range perm[:shape.failing] {
		tg.pass(i)
	}
	log.Printf("checks: starting a second server on the same database")
	start = time.Now()
	two, err := startCheckServe(sbBin, dsn)
	if err != nil {
		return nil, err
	}
	defer two.stop()
	if err := r.settle(ctx, []*checkServe{one, two}, 3*time.Minute); err != nil {
		return nil, err
	}
	res.settle = time.Since(start)
	// A check that moved is probed by its new runner from a random point
	// of its first interval: one interval on, every gap the window sees
	// is between two probes of the runner that holds it now.
	log.Printf("checks: shards settled in %.1f s; waiting one interval", res.settle.Seconds())
	time.Sleep(shape.interval)
	log.Printf("checks: two servers: %s measured, %d targets failing", shape.window, shape.failing)
	if res.two, err = r.column(ctx, []*checkServe{one, two}, perm[shape.failing:2*shape.failing]); err != nil {
		return nil, err
	}
	r.logColumn(res.two)
	res.ended, res.loadEnd = time.Now().UTC(), loadAvg()
	return res, nil
}

// registerChecks registers the instances through cat (a server's HTTP
// API): check-only rows, each with an HTTP check of its own target.
func registerChecks(ctx context.Context, cat switchboard.Catalog, tg *checkTargets, shape checksShape) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	const workers = 16
	for k := range workers {
		wg.Go(func() {
			for i := k; i < shape.instances && first.Load() == nil; i += workers {
				in := switchboard.Instance{ID: checkID(i), Name: "chk", Type: "service", Address: tg.address(i), TTL: shape.ttl,
					Metadata: map[string]string{checks.MetadataCheckOnly: "true"},
					Check:    &switchboard.Check{Target: tg.target(i), Interval: shape.interval, Failures: checksFailures}}
				if _, err := cat.Register(ctx, in); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// settle waits until the servers hold their fair shares of the shards,
// run every check between them, and the watcher discovers every instance
// (each passing).
func (r *checksRun) settle(ctx context.Context, servers []*checkServe, timeout time.Duration) error {
	share := (checks.DefaultShards + len(servers) - 1) / len(servers)
	var state string
	return waitFor(ctx, timeout, func() string { return state }, func() bool {
		var shards, running []string
		var sumShards, sumRunning float64
		ok := true
		for _, s := range servers {
			m, err := s.scrape(ctx)
			if err != nil {
				state = err.Error()
				return false
			}
			shards = append(shards, fmt.Sprint(m[metricShards]))
			running = append(running, fmt.Sprint(m[metricRunning]))
			sumShards += m[metricShards]
			sumRunning += m[metricRunning]
			ok = ok && m[metricShards] == float64(share)
		}
		live := r.w.live.Load()
		state = fmt.Sprintf("shards held %s (want %d each), checks running %s, %d of %d probed, %d of %d discovered (passing)",
			strings.Join(shards, " + "), share, strings.Join(running, " + "), r.tg.probed(), r.shape.instances, live, r.shape.instances)
		return ok && sumShards == checks.DefaultShards && sumRunning == float64(r.shape.instances) && live == int64(r.shape.instances)
	})
}

// column measures one column with servers running the checks, turning
// the targets of failing failing during the window.
func (r *checksRun) column(ctx context.Context, servers []*checkServe, failing []int) (checksColumn, error) {
	shape, tg := r.shape, r.tg
	col := checksColumn{servers: len(servers)}
	before := make([]map[string]float64, len(servers))
	for k, s := range servers {
		m, err := s.scrape(ctx)
		if err != nil {
			return col, err
		}
		before[k] = m
		col.shards = append(col.shards, int(m[metricShards]))
		col.running = append(col.running, int(m[metricRunning]))
	}
	self := os.Getpid()
	serveCPU := make([]time.Duration, len(servers))
	for k, s := range servers {
		serveCPU[k] = procCPU(s.pid)
	}
	pgCPU, selfCPU := cpuOf(r.pg.backends(r.db)), procCPU(self)
	r.w.expect(failing)
	t0 := time.Now()
	ws := tg.openWindow(shape.window)
	r.p.reset()

	// The failing targets turn at times spread over the window, the last
	// early enough to be detected within it.
	spread := max(shape.window-shape.interval*checksFailures-5*time.Second, 0)
	failed := make(chan int64, 1)
	go func() {
		var last int64
		for j, i := range failing {
			at := tg.base.Add(time.Duration(ws) + spread*time.Duration(j)/time.Duration(len(failing)))
			time.Sleep(time.Until(at))
			last = tg.fail(i)
		}
		failed <- last
	}()
	time.Sleep(time.Until(tg.base.Add(time.Duration(ws) + shape.window)))
	elapsed := time.Since(t0).Seconds()
	for k, s := range servers {
		col.serveCores = append(col.serveCores, (procCPU(s.pid)-serveCPU[k]).Seconds()/elapsed)
	}
	col.pgCores = cpuDelta(pgCPU, cpuOf(r.pg.backends(r.db))).Seconds() / elapsed
	col.selfCores = (procCPU(self) - selfCPU).Seconds() / elapsed
	for k, s := range servers {
		m, err := s.scrape(ctx)
		if err != nil {
			return col, err
		}
		col.failedProbes += m[metricFailures] - before[k][metricFailures]
	}
	time.Sleep(50 * time.Millisecond) // probes still being answered when the window closed
	buckets, counts, gaps := tg.window()
	for _, b := range buckets {
		col.probes += b
	}
	col.probesPerSec = float64(col.probes) / shape.window.Seconds()
	col.pause = float64(r.p.worst.Load()) / float64(time.Millisecond)
	col.busiest, col.quietest = herd(buckets)
	col.p99Bucket = p99Bucket(buckets)
	if len(buckets) > 0 {
		most, least := slices.Index(buckets, slices.Max(buckets)), slices.Index(buckets, slices.Min(buckets))
		log.Printf("  probes per 100 ms: busiest at %.1f s of the window, around it %v; quietest at %.1f s, around it %v; the harness's longest pause %.0f ms, at %.1f s",
			float64(most)/10, bucketsAround(buckets, most, 5), float64(least)/10, bucketsAround(buckets, least, 5),
			col.pause, time.Duration(r.p.at.Load()-ws).Seconds())
	}
	col.once = judgeOnce(counts, gaps, shape.interval, shape.window)
	col.served500 = tg.served500.Load()

	// Detection: until every failing target's instance has left the
	// watcher's view, or an interval past the longest it may take.
	last := <-failed
	deadline := tg.base.Add(time.Duration(last) + shape.interval*(checksFailures+1) + 10*time.Second)
	if len(failing) > 0 {
		_ = waitFor(ctx, max(time.Until(deadline), 0), func() string { return "" }, func() bool { return r.w.waiting() == 0 })
	}
	r.w.mu.Lock()
	col.detect, col.propagate, col.missing = r.w.detect, r.w.propagate, len(r.w.pending)
	col.wrong = r.w.wrong
	r.w.mu.Unlock()
	return col, nil
}

func (r *checksRun) logColumn(c checksColumn) {
	log.Printf("  serve %s cores, PostgreSQL %.3f, harness %.3f; %.0f probes/s, herd %.2f; %d checks run twice; detection p50 %.1f s p99 %.1f s (%d of %d, %d missing); wrong removals %v",
		joinCores(c.serveCores), c.pgCores, c.selfCores, c.probesPerSec, c.busiest, c.once.Twice,
		quantile(c.detect, .5), quantile(c.detect, .99), len(c.detect), r.shape.failing, c.missing, c.wrong)
}

var errChecksShape = errors.New("-checks-*: want instances ≥ 1, failing × 2 ≤ instances, an interval of 1s to 1h, a window of at least two intervals")

func (s checksShape) validate() error {
	if s.instances < 1 || s.failing < 0 || 2*s.failing > s.instances || s.interval < switchboard.MinCheckInterval ||
		s.interval > switchboard.MaxCheckInterval || s.window < 2*s.interval || s.ttl < 0 {
		return errChecksShape
	}
	return nil
}
