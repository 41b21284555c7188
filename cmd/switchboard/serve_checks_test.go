package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// metricsOf reads a server's /metrics.
func metricsOf(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

var runningRE = regexp.MustCompile(`(?m)^switchboard_checks_running (\S+)$`)

// running is a server's switchboard_checks_running, -1 when absent.
func running(t *testing.T, url string) int {
	m := runningRE.FindStringSubmatch(metricsOf(t, url))
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return int(n)
}

// checkTarget is an HTTP server answering 200, or 500 once failing is set.
func checkTarget(t *testing.T) (*httptest.Server, *atomic.Bool) {
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &failing
}

func registerChecked(t *testing.T, cat switchboard.Catalog, id, target, addr string) {
	t.Helper()
	if _, err := cat.Register(context.Background(), switchboard.Instance{ID: id, Name: "checked", Type: "db", Address: addr,
		TTL: time.Hour, Check: &switchboard.Check{Target: target, Interval: time.Second, Failures: 1, DeregisterAfter: time.Hour}}); err != nil {
		t.Fatal(err)
	}
}

func health(t *testing.T, cat switchboard.Catalog, id string) switchboard.Status {
	in, err := cat.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return in.Health.Status
}

// TestServeChecks: serve runs the checks of the catalog by default and
// exposes their metrics; --checks=false runs none (and has no check
// metrics).
func TestServeChecks(t *testing.T) {
	dsn, _ := dsnIn(t)
	srv, _ := checkTarget(t)
	p, url := serveProc(t, "--dsn", dsn)
	cat := openCatalog(t, dsn)
	addr := strings.TrimPrefix(srv.URL, "http://")
	registerChecked(t, cat, "db-1", srv.URL+"/health", addr)
	waitForCond(t, "the check to pass", func() bool { return health(t, cat, "db-1") == switchboard.StatusPassing })
	// The runner counts a status change once the catalog has stored it:
	// the count may come a moment after the status is seen.
	var m string
	waitForCond(t, "the status change to be counted", func() bool {
		m = metricsOf(t, url)
		return strings.Contains(m, `switchboard_check_status_changes_total{kind="http",status="passing"}`)
	})
	for _, want := range []string{`switchboard_check_duration_seconds_count{kind="http"}`, `switchboard_check_status_changes_total{kind="http",status="passing"} 1`,
		"switchboard_checks_running 1", "switchboard_check_shards_held 64", "switchboard_catalog_reachable"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, m)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, p.stderr)
	}

	_, url = serveProc(t, "--dsn", dsn, "--checks=false")
	if m := metricsOf(t, url); strings.Contains(m, "switchboard_check") {
		t.Errorf("--checks=false: /metrics has check metrics:\n%s", m)
	}
}

// TestServeChecksFailover: two servers on one catalog share the checks,
// each check run by one (their switchboard_checks_running add up to the
// checks); when one is killed (SIGKILL, its leases left to expire), the
// other runs every check: a target failing after the kill turns every
// instance critical.
func TestServeChecksFailover(t *testing.T) {
	dsn, _ := dsnIn(t)
	srv, failing := checkTarget(t)
	a, urlA := serveProc(t, "--dsn", dsn)
	b, urlB := serveProc(t, "--dsn", dsn)
	cat := openCatalog(t, dsn)
	addr := strings.TrimPrefix(srv.URL, "http://")
	const n = 12
	for i := range n {
		registerChecked(t, cat, fmt.Sprintf("db-%d", i), fmt.Sprintf("%s/%d", srv.URL, i), addr)
	}
	// waitUntil waits up to a minute: a failover waits for leases of the
	// server's default TTL (15s) to expire.
	waitUntil(t, "both servers to run some checks, each check on one", func() bool {
		ra, rb := running(t, urlA), running(t, urlB)
		return ra > 0 && rb > 0 && ra+rb == n
	})
	t.Logf("checks running: %d on a, %d on b", running(t, urlA), running(t, urlB))
	waitForCond(t, "every check to pass", func() bool {
		for i := range n {
			if health(t, cat, fmt.Sprintf("db-%d", i)) != switchboard.StatusPassing {
				return false
			}
		}
		return true
	})
	killed := time.Now()
	a.cmd.Process.Kill()
	failing.Store(true)
	defer func() {
		if t.Failed() {
			t.Logf("server b's log:\n%s\nmetrics:\n%s", b.stderr, metricsOf(t, urlB))
		}
	}()
	waitUntil(t, "the other server to run every check", func() bool { return running(t, urlB) == n })
	t.Logf("server b ran every check %s after a was killed", time.Since(killed).Round(time.Millisecond))
	waitUntil(t, "every instance to turn critical", func() bool {
		for i := range n {
			if health(t, cat, fmt.Sprintf("db-%d", i)) != switchboard.StatusCritical {
				return false
			}
		}
		return true
	})
}
