package checks

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/cputime"
)

// BenchmarkRunner1000: one runner probing 1,000 HTTP checks at a 1 s
// interval (1,000 probes a second) on a SQLite catalog, against one local
// target in the same process. Each iteration measures three intervals,
// once every row passes (the first probes' results written). It reports
// the probes a second the target served, the CPU the process used
// (runner and target together) in cores, and the herd: the
// busiest 100 ms of the window over the mean of its 100 ms buckets (1 is
// perfectly even; a herd at the top of each second would be near 10).
func BenchmarkRunner1000(b *testing.B) {
	const n, interval, window = 1000, time.Second, 3 * time.Second
	var buckets [1 << 12]atomic.Int64
	var origin atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := origin.Load(); o != 0 {
			if i := (time.Now().UnixNano() - o) / int64(100*time.Millisecond); i >= 0 && i < int64(len(buckets)) {
				buckets[i].Add(1)
			}
		}
	}))
	defer srv.Close()
	cat, err := switchboard.Open(context.Background(), sqliteDSN(b), switchboard.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for i := range n {
		if _, err := cat.Register(context.Background(), switchboard.Instance{ID: fmt.Sprintf("b-%04d", i), Name: "b", Type: "t",
			Address: addr, TTL: time.Hour, Check: &switchboard.Check{Target: fmt.Sprintf("%s/%d", srv.URL, i), Interval: interval}}); err != nil {
			b.Fatal(err)
		}
	}
	r, err := New(cat, Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Until every row passes: the first probes' results are 1,000 writes.
	for {
		ins, err := cat.List(context.Background(), switchboard.Query{Name: "b"})
		if err != nil {
			b.Fatal(err)
		}
		if len(ins) == n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.ResetTimer()
	var probes, cpu, wall float64
	herd := 0.0
	for range b.N {
		for i := range buckets {
			buckets[i].Store(0)
		}
		start, cpu0 := time.Now(), cputime.Process()
		origin.Store(start.UnixNano())
		time.Sleep(window)
		origin.Store(0)
		wall += time.Since(start).Seconds()
		cpu += (cputime.Process() - cpu0).Seconds()
		var total, most int64
		k := int(window / (100 * time.Millisecond))
		for i := range k {
			v := buckets[i].Load()
			total += v
			most = max(most, v)
		}
		if testing.Verbose() {
			var bs []int64
			for i := range k {
				bs = append(bs, buckets[i].Load())
			}
			b.Logf("probes per 100 ms: %v", bs)
		}
		probes += float64(total)
		if total > 0 {
			herd = max(herd, float64(most)/(float64(total)/float64(k)))
		}
	}
	b.ReportMetric(probes/wall, "probes/s")
	b.ReportMetric(cpu/wall, "cpu-cores")
	b.ReportMetric(herd, "herd")
	b.ReportMetric(0, "ns/op")
}
