package main

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHerd(t *testing.T) {
	busiest, quietest := herd([]int64{100, 100, 200, 0, 100})
	if busiest != 2 || quietest != 0 {
		t.Errorf("herd = %v, %v; want 2, 0", busiest, quietest)
	}
	if b, q := herd([]int64{5, 5, 5, 5}); b != 1 || q != 1 {
		t.Errorf("even buckets: herd = %v, %v; want 1, 1", b, q)
	}
	if b, _ := herd([]int64{0, 0}); !math.IsNaN(b) {
		t.Errorf("no probes: herd = %v, want NaN", b)
	}
}

// TestJudgeOnce: probes of one runner, an interval apart give or take a
// little, pass; a second runner on the same check, at any phase, is seen.
func TestJudgeOnce(t *testing.T) {
	const interval, window = 10 * time.Second, 60 * time.Second
	probe := func(phases ...time.Duration) (count int32, gap int64) {
		var at []time.Duration
		for _, p := range phases {
			for x := p; x < window; x += interval {
				at = append(at, x)
			}
		}
		gap = noGap
		for i, a := range at {
			for _, b := range at[i+1:] {
				gap = min(gap, int64(max(a-b, b-a)))
			}
		}
		return int32(len(at)), gap
	}
	var counts []int32
	var gaps []int64
	add := func(c int32, g int64) { counts, gaps = append(counts, c), append(gaps, g) }
	add(probe(3 * time.Second)) // one runner
	add(probe(0))               // one runner, on the window's edge: 6 probes
	add(7, int64(interval-50*time.Millisecond))
	add(5, int64(2*interval)) // a slot skipped
	add(1, noGap)
	s := judgeOnce(counts, gaps, interval, window)
	if s.Twice != 0 || s.Expected != 6 || s.Counts[6] != 2 || math.Abs(s.MinGap-9.95) > 1e-9 {
		t.Fatalf("one runner each: %+v", s)
	}
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Second, 5 * time.Second, 8 * time.Second, 9999 * time.Millisecond} {
		c, g := probe(time.Second, time.Second+d)
		if s := judgeOnce([]int32{c}, []int64{g}, interval, window); s.Twice != 1 {
			t.Errorf("two runners %s apart (%d probes, closest %s): not seen: %+v", d, c, time.Duration(g), s)
		}
	}
	if s := judgeOnce([]int32{8}, []int64{int64(interval)}, interval, window); s.Twice != 1 {
		t.Errorf("8 probes in 6 intervals: not seen: %+v", s)
	}
}

func TestCountsText(t *testing.T) {
	if got, want := countsText(map[int]int{6: 9990, 5: 4, 7: 6}), "6: 9,990; 7: 6; 5: 4"; got != want {
		t.Errorf("countsText = %q, want %q", got, want)
	}
}

func TestMetricsOf(t *testing.T) {
	text := `# HELP switchboard_checks_running Checks this process probes now.
# TYPE switchboard_checks_running gauge
switchboard_checks_running 5012
switchboard_check_failures_total{kind="grpc"} 0
switchboard_check_failures_total{kind="http"} 617
switchboard_check_shards_held 32
`
	m, err := metricsOf(strings.NewReader(text), metricRunning, metricShards, metricFailures, "absent")
	if err != nil {
		t.Fatal(err)
	}
	if m[metricRunning] != 5012 || m[metricShards] != 32 || m[metricFailures] != 617 || !math.IsNaN(m["absent"]) {
		t.Errorf("metricsOf = %v", m)
	}
}

func TestChecksArgs(t *testing.T) {
	got := checksArgs([]string{"-etcd", "/usr/bin/etcd", "-switchboard=/tmp/x/switchboard", "-parts", "checks", "-checks-window=30s"})
	if want := "bench/run -parts checks -checks-window=30s"; got != want {
		t.Errorf("checksArgs = %q, want %q", got, want)
	}
}

// TestTargets: the targets count each probe of a check in the window,
// the closest two, and answer 500 once the check is failing, keeping
// when its failures-th failing probe came.
func TestTargets(t *testing.T) {
	tg, err := startTargets(4, 2, 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.close()
	get := func(i int) int {
		resp, err := http.Get(tg.target(i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	get(1) // before the window
	tg.openWindow(time.Hour)
	for range 3 {
		if code := get(1); code != http.StatusOK {
			t.Fatalf("passing target: %d", code)
		}
	}
	tg.fail(2)
	for k := range 3 {
		if code := get(2); code != http.StatusInternalServerError {
			t.Fatalf("failing target: %d", code)
		}
		if set := tg.lastFail[2].Load() != 0; set != (k >= 1) {
			t.Fatalf("after %d failing probes of 2, the time of the second kept: %v", k+1, set)
		}
	}
	buckets, counts, gaps := tg.window()
	if fmt.Sprint(counts) != "[0 3 3 0]" || gaps[0] != noGap || gaps[1] == noGap || gaps[1] < 0 {
		t.Errorf("counts %v, gaps %v", counts, gaps)
	}
	var total int64
	for _, b := range buckets {
		total += b
	}
	if total != 6 || tg.served500.Load() != 3 || tg.probes[1].Load() != 4 || tg.probed() != 2 {
		t.Errorf("%d probes in the buckets, %d 500s, %d probes of 1, %d probed", total, tg.served500.Load(), tg.probes[1].Load(), tg.probed())
	}
	if !strings.HasPrefix(tg.address(3), "127.0.0.1:") || tg.address(1) != tg.address(3) || tg.address(0) == tg.address(1) {
		t.Errorf("addresses %s %s %s", tg.address(0), tg.address(1), tg.address(3))
	}
	if checkIndex(checkID(42)) != 42 || checkIndex("other") != -1 {
		t.Error("checkIndex(checkID(i)) != i")
	}
}
