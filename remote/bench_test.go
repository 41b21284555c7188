package remote_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/remote"
)

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkSSEFanout: 1,000 SSE subscribers on one server (SQLite) each
// receive a registration. Reported: the time from just before the
// Register call to each subscriber's reading of the event (p50, p99 over
// all subscribers and iterations), and the same counted from when Register
// returned.
func BenchmarkSSEFanout(b *testing.B) {
	const subscribers = 1000
	cat := testkit.OpenSQLite(b)
	url, _ := serve(b, cat, httpapi.Options{})
	tr := &http.Transport{MaxIdleConnsPerHost: subscribers, MaxConnsPerHost: 0}
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type arrival struct {
		id string
		at time.Time
	}
	arrivals := make(chan arrival, subscribers*4)
	var ready sync.WaitGroup
	var wg sync.WaitGroup
	for i := 0; i < subscribers; i++ {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/watch", nil)
			resp, err := hc.Do(req)
			if err != nil {
				ready.Done()
				b.Error(err)
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			synced := false
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					if !synced {
						ready.Done()
					}
					return
				}
				switch {
				case strings.HasPrefix(line, "event: synced") && !synced:
					synced = true
					ready.Done()
				case strings.HasPrefix(line, `data: {"event":"added"`):
					at := time.Now()
					_, rest, _ := strings.Cut(line, `"id":"`)
					id, _, _ := strings.Cut(rest, `"`)
					arrivals <- arrival{id, at}
				}
			}
		}()
	}
	ready.Wait()
	var fromStart, fromReturn []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		in, err := cat.Register(ctx, switchboard.Instance{Name: fmt.Sprintf("fan-%d", i), Type: "t", Address: "127.0.0.1:1", TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		for got := 0; got < subscribers; {
			select {
			case a := <-arrivals:
				if a.id != in.ID {
					continue
				}
				got++
				fromStart = append(fromStart, a.at.Sub(start))
				fromReturn = append(fromReturn, a.at.Sub(returned))
			case <-time.After(30 * time.Second):
				b.Fatalf("iteration %d: %d of %d subscribers heard", i, got, subscribers)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(fromStart, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(fromStart, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(fromReturn, 0.5)), "push-p50-ms")
	b.ReportMetric(ms(percentile(fromReturn, 0.99)), "push-p99-ms")
	cancel()
	wg.Wait()
}

// BenchmarkRegisterToWatcherViaServer: one registration, written directly
// on the SQLite catalog, observed in the same iteration by a watcher on
// the catalog itself and by a watcher through the server (remote client
// over SSE): the server's added latency.
func BenchmarkRegisterToWatcherViaServer(b *testing.B) {
	cat := testkit.OpenSQLite(b)
	url, _ := serve(b, cat, httpapi.Options{})
	rc := client(b, url, remote.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	direct, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		b.Fatal(err)
	}
	viaServer, err := rc.Watch(ctx, switchboard.Query{})
	if err != nil {
		b.Fatal(err)
	}
	for _, ch := range []<-chan switchboard.Event{direct, viaServer} {
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				break
			}
		}
	}
	wait := func(ch <-chan switchboard.Event, id string) time.Time {
		for {
			select {
			case ev := <-ch:
				if ev.Kind == switchboard.EventAdded && ev.Instance.ID == id {
					return time.Now()
				}
			case <-time.After(30 * time.Second):
				b.Fatal("no event")
			}
		}
	}
	var d, s []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var dAt, sAt time.Time
		var wg sync.WaitGroup
		id := fmt.Sprintf("rw-%d", i)
		wg.Add(2)
		go func() { defer wg.Done(); dAt = wait(direct, id) }()
		go func() { defer wg.Done(); sAt = wait(viaServer, id) }()
		start := time.Now()
		if _, err := cat.Register(ctx, switchboard.Instance{ID: id, Name: "rw", Type: "t", Address: "127.0.0.1:1", TTL: time.Minute}); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		d = append(d, dAt.Sub(start))
		s = append(s, sAt.Sub(start))
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(d, 0.5)), "direct-p50-ms")
	b.ReportMetric(ms(percentile(d, 0.99)), "direct-p99-ms")
	b.ReportMetric(ms(percentile(s, 0.5)), "server-p50-ms")
	b.ReportMetric(ms(percentile(s, 0.99)), "server-p99-ms")
}

// BenchmarkRegisterHeartbeat64: 64 concurrent clients (each its own remote
// catalog handle) each register a new instance and heartbeat it, through
// one server on SQLite; reported as requests (register + heartbeat) per
// second, with the default 50 ms heartbeat window and with a 1 ms one.
func BenchmarkRegisterHeartbeat64(b *testing.B) {
	for _, window := range []time.Duration{50 * time.Millisecond, time.Millisecond} {
		b.Run(fmt.Sprintf("window=%s", window), func(b *testing.B) {
			const clients = 64
			cat := testkit.OpenSQLite(b)
			url, _ := serve(b, cat, httpapi.Options{HeartbeatWindow: window})
			cs := make([]*remote.Client, clients)
			for i := range cs {
				cs[i] = client(b, url, remote.Config{})
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < clients; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						in, err := cs[g].Register(ctx, switchboard.Instance{Name: "rh", Type: "t", Address: "127.0.0.1:1", TTL: time.Minute})
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := cs[g].Heartbeat(ctx, in.ID); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(2*b.N)/el.Seconds(), "req/s")
		})
	}
}
