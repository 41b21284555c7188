package main

// The targets of the checks part, and what is computed from their counts.

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// bucketWidth is the width of the buckets the herd is judged on.
const bucketWidth = 100 * time.Millisecond

// noGap is minGap's value for a check with fewer than two probes in the
// window.
const noGap = math.MaxInt64

// checkTargets are the HTTP servers the checks probe: several listeners on
// 127.0.0.1 in this process, check i at /c/i of listener i % listeners.
// Every probe is counted by its check with its arrival time, on atomics
// only (the harness shares the host with the servers it measures). Times
// are nanoseconds since base, on the monotonic clock the watcher's times
// are taken on too.
type checkTargets struct {
	base     time.Time
	ports    []int
	servers  []*http.Server
	failures int // Check.Failures: the failing probe whose time is kept

	probes     []atomic.Int64 // per check, since the start
	last       []atomic.Int64 // per check: its last probe (0: none)
	failSince  []atomic.Int64 // per check: when it was turned failing (0: passing)
	failProbes []atomic.Int64 // per check: probes answered 500 since then
	lastFail   []atomic.Int64 // per check: when the failures-th of those came (0: not yet)

	// The measured window is [winStart, winEnd); winEnd 0: none open.
	winStart, winEnd atomic.Int64
	inWin            []atomic.Int32 // per check: probes in the window
	minGap           []atomic.Int64 // per check: the smallest gap between two of its probes in the window
	buckets          []atomic.Int64 // probes in the window per bucketWidth
	served500        atomic.Int64   // probes answered 500 in the window
}

// startTargets listens on listeners loopback ports for n checks, whose
// windows last at most window.
func startTargets(n, listeners, failures int, window time.Duration) (*checkTargets, error) {
	t := &checkTargets{base: time.Now(), failures: failures, buckets: make([]atomic.Int64, (window+bucketWidth-1)/bucketWidth),
		probes: make([]atomic.Int64, n), last: make([]atomic.Int64, n), failSince: make([]atomic.Int64, n),
		failProbes: make([]atomic.Int64, n), lastFail: make([]atomic.Int64, n),
		inWin: make([]atomic.Int32, n), minGap: make([]atomic.Int64, n)}
	errs := log.New(os.Stderr, "bench: checks target: ", log.Ltime)
	for range listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.close()
			return nil, err
		}
		srv := &http.Server{Handler: t, ReadHeaderTimeout: 5 * time.Second, ErrorLog: errs}
		t.servers = append(t.servers, srv)
		t.ports = append(t.ports, ln.Addr().(*net.TCPAddr).Port)
		go srv.Serve(ln)
	}
	return t, nil
}

func (t *checkTargets) close() {
	for _, s := range t.servers {
		s.Close()
	}
}

// now is the time since base.
func (t *checkTargets) now() int64 { return int64(time.Since(t.base)) }

// address and target are check i's instance address and check target.
func (t *checkTargets) address(i int) string {
	return fmt.Sprintf("127.0.0.1:%d", t.ports[i%len(t.ports)])
}

func (t *checkTargets) target(i int) string { return fmt.Sprintf("http://%s/c/%d", t.address(i), i) }

// ServeHTTP answers a probe: 200, or 500 while the check is failing.
func (t *checkTargets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := t.now()
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/c/"))
	if err != nil || i < 0 || i >= len(t.probes) {
		http.NotFound(w, r)
		return
	}
	t.probes[i].Add(1)
	prev := t.last[i].Swap(now)
	start, end := t.winStart.Load(), t.winEnd.Load()
	in := end != 0 && now >= start && now < end
	if in {
		if b := (now - start) / int64(bucketWidth); b < int64(len(t.buckets)) {
			t.buckets[b].Add(1)
		}
		t.inWin[i].Add(1)
		if prev >= start {
			for gap := now - prev; ; {
				g := t.minGap[i].Load()
				if g <= gap || t.minGap[i].CompareAndSwap(g, gap) {
					break
				}
			}
		}
	}
	if t.failSince[i].Load() != 0 {
		if t.failProbes[i].Add(1) == int64(t.failures) {
			t.lastFail[i].Store(now)
		}
		if in {
			t.served500.Add(1)
		}
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// fail turns check i's target failing (HTTP 500) and returns when; pass
// turns it passing again.
func (t *checkTargets) fail(i int) int64 {
	t.failProbes[i].Store(0)
	t.lastFail[i].Store(0)
	now := t.now()
	t.failSince[i].Store(now)
	return now
}

func (t *checkTargets) pass(i int) { t.failSince[i].Store(0) }

// probed counts the checks probed at least once.
func (t *checkTargets) probed() int {
	n := 0
	for i := range t.probes {
		if t.probes[i].Load() > 0 {
			n++
		}
	}
	return n
}

// openWindow clears the window's counts and opens a window of length d
// (at most startTargets' window) from now; it returns its start.
func (t *checkTargets) openWindow(d time.Duration) int64 {
	t.winEnd.Store(0)
	for i := range t.inWin {
		t.inWin[i].Store(0)
		t.minGap[i].Store(noGap)
	}
	for i := range t.buckets {
		t.buckets[i].Store(0)
	}
	t.served500.Store(0)
	start := t.now()
	t.winStart.Store(start)
	t.winEnd.Store(start + int64(d))
	return start
}

// window returns the counts of the last window (read once it has ended).
func (t *checkTargets) window() (buckets []int64, counts []int32, gaps []int64) {
	for i := range t.buckets {
		buckets = append(buckets, t.buckets[i].Load())
	}
	for i := range t.inWin {
		counts = append(counts, t.inWin[i].Load())
		gaps = append(gaps, t.minGap[i].Load())
	}
	return buckets, counts, gaps
}

// herd returns the busiest and the quietest bucket over the mean bucket
// (NaN for no probes).
func herd(buckets []int64) (busiest, quietest float64) {
	if len(buckets) == 0 {
		return nan, nan
	}
	var total int64
	for _, b := range buckets {
		total += b
	}
	if total == 0 {
		return nan, nan
	}
	mean := float64(total) / float64(len(buckets))
	return float64(slices.Max(buckets)) / mean, float64(slices.Min(buckets)) / mean
}

// p99Bucket is the 99th percentile bucket over the mean (NaN: no probes).
func p99Bucket(buckets []int64) float64 {
	var total int64
	xs := make([]float64, len(buckets))
	for i, b := range buckets {
		total += b
		xs[i] = float64(b)
	}
	if total == 0 {
		return nan
	}
	return quantile(xs, .99) / (float64(total) / float64(len(buckets)))
}

// bucketsAround is the buckets from k−n to k+n, for the log.
func bucketsAround(buckets []int64, k, n int) []int64 {
	return buckets[max(k-n, 0):min(k+n+1, len(buckets))]
}

// pauses measures this process's own scheduling: a ticker every 20 ms
// records how late it fires, so that a burst of probes at the targets can
// be told from the harness being held up (the host descheduling it) and
// then answering a backlog at once.
type pauses struct {
	worst atomic.Int64 // ns late, the most since reset
	at    atomic.Int64 // when the worst one ended, ns since base
}

func (p *pauses) run(ctx context.Context, base time.Time) {
	const every = 20 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			if late := int64(now.Sub(last) - every); late > p.worst.Load() {
				p.worst.Store(late)
				p.at.Store(int64(now.Sub(base)))
			}
			last = now
		}
	}
}

func (p *pauses) reset() { p.worst.Store(0); p.at.Store(0) }

// onceStats judges whether each check ran on one runner only.
type onceStats struct {
	Expected float64     // window / interval: a check's probes in the window
	Counts   map[int]int // probes in the window → checks
	Twice    int         // checks judged probed by more than one runner
	MinGap   float64     // the smallest gap between two probes of one check, s (NaN: none)
}

// judgeOnce applies the once rule to the probes of each check in a window
// of length window: counts[i] probes, the closest two gaps[i] ns apart
// (noGap: fewer than two).
//
// One runner probes a check on a schedule of its own, interval after
// interval from a random phase (a probe held up skips a slot, it never
// comes early), so at the target its probes are an interval apart, give
// or take the scheduling and connection jitter of each, and at most
// window/interval + 1 of them fall in the window. Two runners probing
// the same check each keep their own phase: their probes alternate, d
// and interval − d apart, so two of them are at most interval/2 apart,
// and the window holds about twice as many. A check is judged probed by
// more than one runner when two of its probes are less than interval/2
// apart, or when the window holds more than window/interval + 1 of them.
// The window must span at least two intervals for the gap rule to see
// both runners' probes.
func judgeOnce(counts []int32, gaps []int64, interval, window time.Duration) onceStats {
	s := onceStats{Expected: float64(window) / float64(interval), Counts: map[int]int{}, MinGap: nan}
	most := int32(window/interval) + 1
	least := int64(noGap)
	for i, c := range counts {
		s.Counts[int(c)]++
		if c > most || gaps[i] < int64(interval/2) {
			s.Twice++
		}
		least = min(least, gaps[i])
	}
	if least != noGap {
		s.MinGap = time.Duration(least).Seconds()
	}
	return s
}

// countsText writes a histogram of probes per check, most checks first:
// "6: 9,990; 5: 6; 7: 4".
func countsText(counts map[int]int) string {
	keys := make([]int, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b int) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return a - b
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d: %s", k, num(float64(counts[k])))
	}
	return strings.Join(parts, "; ")
}

// metricsOf reads the values of the named metrics (no labels, or with the
// labels as written in the exposition: name{kind="http"}) from a
// Prometheus text exposition; a metric absent is NaN.
func metricsOf(r io.Reader, names ...string) (map[string]float64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(names))
	for _, n := range names {
		out[n] = nan
	}
	for l := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(l), " ")
		if _, want := out[k]; !ok || !want {
			continue
		}
		if out[k], err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
			return nil, fmt.Errorf("metric %s: %v", k, err)
		}
	}
	return out, nil
}
