package httpapi_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// largeBody is an instance of about 330 KB (a components document at its
// largest and 63 metadata values of 1 KB), different for each round.
func largeBody(id string, round int) map[string]any {
	md := map[string]string{}
	for i := range switchboard.MaxMetadataKeys - 1 { // one key is the server's
		md["k"+strconv.Itoa(i)] = strings.Repeat(strconv.Itoa(round%10), switchboard.MaxMetadataValue)
	}
	blob := strings.Repeat("x", switchboard.MaxComponentsSize-64)
	return map[string]any{"id": id, "name": "big", "type": "writer", "address": "127.0.0.1:4317",
		"version": "v" + strconv.Itoa(round), "metadata": md, "components": map[string]any{"blob": blob}}
}

// TestHistoryBoundedInBytes: re-registering one large instance over and
// over (each an updated event) keeps the watch history within
// Options.HistoryBytes, by dropping old events, not within its count of
// events alone (10,000 events of 330 KB would be gigabytes). A watcher
// that stays connected still sees every change's last state.
func TestHistoryBoundedInBytes(t *testing.T) {
	const limit = 4 << 20
	s := start(t, httpapi.Options{ReapInterval: -1, HistoryBytes: limit})
	w := watchSSE(t, s.url+"/v1/watch")
	for ev := w.next(t); ev.event != "synced"; ev = w.next(t) {
	}
	const rounds = 16
	var secret string
	for i := range rounds {
		r := register(t, s, largeBody("big-1", i), "X-Instance-Secret", secret)
		secret = r.Secret
		if b, n := httpapi.HistorySize(s.api); b > limit && n > 1 {
			t.Fatalf("after %d re-registrations the history counts %d bytes in %d events; want at most %d", i+1, b, n, limit)
		}
	}
	b, n := httpapi.HistorySize(s.api)
	if n >= rounds || n < 2 {
		t.Fatalf("history holds %d events (%d bytes) after %d large re-registrations; want fewer, and more than one", n, b, rounds)
	}
	if b < int64(n)*330<<10 {
		t.Fatalf("history counts %d bytes for %d events of 330 KB: it undercounts", b, n)
	}
	// The watcher, reading as the events come, ends on the last version
	// (in order, or after a fresh snapshot if it fell behind).
	want := fmt.Sprintf("v%d", rounds-1)
	for {
		ev := w.next(t)
		in, _ := ev.data["instance"].(map[string]any)
		if in != nil && in["version"] == want {
			break
		}
	}
}

// BenchmarkLargeReregistrations re-registers one id 2,000 times with a
// 330 KB body through a server with the default history bounds, and
// reports the process's peak RSS and the live heap after a GC.
func BenchmarkLargeReregistrations(b *testing.B) {
	cat := testkit.OpenSQLite(b)
	for range b.N {
		s := serveOn(b, cat, httpapi.Options{ReapInterval: -1})
		var secret string
		for i := range 2000 {
			r := register(b, s, largeBody("big-1", i), "X-Instance-Secret", secret)
			secret = r.Secret
		}
		hb, n := httpapi.HistorySize(s.api)
		b.ReportMetric(float64(hb)/(1<<20), "history-MiB")
		b.ReportMetric(float64(n), "history-events")
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(peakRSS()/(1<<20), "peak-rss-MiB")
}

// peakRSS is the process's peak resident set in bytes (VmHWM), 0 where
// /proc does not say.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}
