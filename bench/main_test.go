package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// The harness's children are the test binary run again: TestMain hands
// them to runChild, as main does.
func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
	case dnsFloorRole:
		os.Exit(runDNSFloor())
	default:
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// TestRunSQLite runs every part of the harness on SQLite alone (no etcd,
// no PostgreSQL), small: the child protocol, the measurements and the
// table, checked for what they must contain.
func TestRunSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 15 processes")
	}
	cfg := config{
		parts:      set("churn,latency,fleet"),
		systems:    set("sqlite"),
		churnProcs: 3, churnWindow: 500 * time.Millisecond,
		watchers: []int{1, 3}, watchProcs: 2, changes: 20, interval: 5 * time.Millisecond,
		fleetProcs: 3, fleet: fleetShape{each: 4, start: time.Minute, warmup: 100 * time.Millisecond, window: 1500 * time.Millisecond},
	}
	var out bytes.Buffer
	res, err := measureAll(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	printTable(&out, cfg, res)
	if len(res.errs) > 0 {
		t.Fatalf("failed: %v\n%s", res.errs, out.String())
	}
	c := res.churn["sqlite"]
	if c.OpsPerSec <= 0 || c.Errors != 0 {
		t.Errorf("churn: %+v", c)
	}
	for _, n := range cfg.watchers {
		l := res.lat["sqlite"][n]
		if l.Samples != n*cfg.changes || l.Missing != 0 || !(l.P50 > 0 && l.P50 <= l.P99) {
			t.Errorf("latency at %d watchers: %+v", n, l)
		}
	}
	if l := res.lat["sqlite"][3]; l.Procs != 2 {
		t.Errorf("3 watchers over %d processes, want 2", l.Procs)
	}
	f := res.fleet["sqlite"]
	if f.Procs != 3 || f.Want != 12 || f.Live != 12 || f.Failures != 0 || f.RenewalsPerSec <= 0 || f.ClientCores <= 0 {
		t.Errorf("fleet: %+v", f)
	}
	table := out.String()
	for _, want := range []string{
		"| measure | Switchboard SQLite | target (this run) |",
		"write churn: 3 processes",
		"register → 1 watcher in 1 other process",
		"register → 3 watchers in 2 other processes",
		"3 processes × 4 registrations",
		"12 of 12 live",
		"SQLite ≥ 1×: not measured", // no etcd in this run
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestNum(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567.8: "1,234,568", -4321: "-4,321", math.NaN(): "?"} {
		if got := num(x); got != want {
			t.Errorf("num(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	if got := quantile(xs, 0.5); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := quantile(xs, 0.99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
	if xs[0] != 5 {
		t.Error("quantile sorted its input")
	}
	if !math.IsNaN(quantile(nil, 0.5)) {
		t.Error("quantile of nothing is not NaN")
	}
}

func TestCPUDelta(t *testing.T) {
	before := map[int]time.Duration{1: time.Second, 2: time.Second}
	after := map[int]time.Duration{1: 3 * time.Second, 3: time.Second} // 2 gone, 3 new
	if got := cpuDelta(before, after); got != 3*time.Second {
		t.Errorf("cpuDelta = %v, want 3s", got)
	}
	if procCPU(os.Getpid()) < 0 || procCPU(-1) != 0 {
		t.Error("procCPU")
	}
}
