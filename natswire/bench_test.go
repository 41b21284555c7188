package natswire

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchboard-io/switchboard/router"
)

// benchEcho serves an echo module named bench on url with opts and returns
// a router that sends to it over a wire of its own connection.
func benchEcho(b *testing.B, url string, opts Options) (*router.Router, *Wire) {
	b.Helper()
	opts.Logger = quiet
	srv := newWire(b, connect(b, url), opts)
	r, err := router.New(router.Options{Module: "bench", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	r.HandleDefault(router.Echo)
	listen(b, srv, "bench", r.Dispatch)
	w := newWire(b, connect(b, url), opts)
	client, err := router.New(router.Options{Module: "client", Wire: w, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return client, w
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkRoutedVsRaw alternates, in one run, a routed request (router →
// natswire) and a raw nats.go request with the SDK's headers, both to the
// same echo module on this machine's NATS server, and reports both p50
// latencies and their ratio.
func BenchmarkRoutedVsRaw(b *testing.B) {
	prefix := uniquePrefix()
	client, _ := benchEcho(b, sharedURL, Options{Prefix: prefix})
	raw := connect(b, sharedURL)
	ctx := context.Background()
	payload := []byte("ping")
	rawReq := func() error {
		m := &nats.Msg{Subject: prefix + ".bench.msg", Data: payload, Header: nats.Header{}}
		m.Header.Set(HeaderFrom, "f.client.n:out")
		m.Header.Set(HeaderTo, "f.bench.n:in")
		m.Header.Set(HeaderEdgeID, "e")
		m.Header.Set(HeaderMsgID, "e")
		_, err := raw.RequestMsgWithContext(ctx, m)
		return err
	}
	routed := func() error {
		_, err := client.Send(ctx, &router.Message{From: "f.client.n:out", To: "f.bench.n:in", EdgeID: "e", Payload: payload})
		return err
	}
	for range 200 { // warm up both paths
		if err := rawReq(); err != nil {
			b.Fatal(err)
		}
		if err := routed(); err != nil {
			b.Fatal(err)
		}
	}
	rawLat := make([]time.Duration, 0, b.N)
	routedLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := rawReq(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := routed(); err != nil {
			b.Fatal(err)
		}
		rawLat = append(rawLat, t1.Sub(t0))
		routedLat = append(routedLat, time.Since(t1))
	}
	b.StopTimer()
	r, w := p50(rawLat), p50(routedLat)
	b.ReportMetric(float64(r.Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(w.Microseconds()), "routed-p50-µs")
	b.ReportMetric(float64(w)/float64(r), "ratio-p50")
}

// parallel runs b.N calls of fn over 64 senders and reports messages/s.
func parallel(b *testing.B, fn func(i int) error) {
	const senders = 64
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	b.ResetTimer()
	start := time.Now()
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < b.N; i += senders {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkCoreThroughput64: routed request/reply over core NATS with 64
// concurrent senders.
func BenchmarkCoreThroughput64(b *testing.B) {
	client, _ := benchEcho(b, sharedURL, Options{Prefix: uniquePrefix()})
	ctx := context.Background()
	parallel(b, func(int) error {
		_, err := client.Send(ctx, &router.Message{To: "f.bench.n:in", Payload: []byte("ping")})
		return err
	})
}

// BenchmarkJetStreamThroughput64: routed request/reply over the JetStream
// durable wire (stored, consumed, acknowledged, replied) with 64 concurrent
// senders, on an embedded broker with file storage.
func BenchmarkJetStreamThroughput64(b *testing.B) {
	br := startBroker(b, b.TempDir(), -1)
	client, _ := benchEcho(b, br.ClientURL(), Options{Mode: JetStream})
	ctx := context.Background()
	parallel(b, func(int) error {
		_, err := client.Send(ctx, &router.Message{To: "f.bench.n:in", Payload: []byte("ping")})
		return err
	})
}

// BenchmarkJetStreamPublish64: durable fire-and-forget publishes (stored
// once the broker acknowledges) with 64 concurrent senders.
func BenchmarkJetStreamPublish64(b *testing.B) {
	br := startBroker(b, b.TempDir(), -1)
	_, w := benchEcho(b, br.ClientURL(), Options{Mode: JetStream})
	ctx := context.Background()
	parallel(b, func(int) error {
		return w.Publish(ctx, &router.Message{To: "f.bench.n:in", Payload: []byte("ping")})
	})
}
