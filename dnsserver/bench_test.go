package dnsserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/dnsserver"
)

// fixedCatalog is a catalog whose watch hands out a fixed set and then
// nothing: a cache of 10,000 instances without a database to fill.
type fixedCatalog struct {
	switchboard.Catalog // nil: only Watch is called
	set                 []switchboard.Instance
}

func (c *fixedCatalog) Watch(ctx context.Context, _ switchboard.Query) (<-chan switchboard.Event, error) {
	ch := make(chan switchboard.Event, len(c.set)+1)
	for _, in := range c.set {
		ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
	}
	ch <- switchboard.Event{Kind: switchboard.EventSynced}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (c *fixedCatalog) Close() error { return nil }

// benchServer is a server over 10,000 instances spread over 1,000 names.
func benchServer(b *testing.B) (*dnsserver.Server, [][]byte) {
	const instances, names = 10000, 1000
	cat := &fixedCatalog{}
	for i := range instances {
		cat.set = append(cat.set, switchboard.Instance{ID: fmt.Sprintf("i-%d", i), Name: fmt.Sprintf("svc-%04d", i%names), Type: "bench",
			Address: fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 1024+i%1000), Capabilities: []string{"bench_cap"}})
	}
	cache, err := discovery.New(context.Background(), cat, discovery.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cache.Close)
	srv, err := dnsserver.New(cache, dnsserver.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	var qs [][]byte
	for i := range names {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("svc-%04d.service.switchboard.", i), dns.TypeA)
		p, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		qs = append(qs, p)
	}
	return srv, qs
}

// BenchmarkAnswer is the handler alone (no socket): a query for A of one
// of 1,000 names, unpacked, answered and packed.
func BenchmarkAnswer(b *testing.B) {
	srv, qs := benchServer(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := new(dns.Msg)
		if err := r.Unpack(qs[i%len(qs)]); err != nil {
			b.Fatal(err)
		}
		m := srv.Answer(r, false)
		if len(m.Answer) != 3 {
			b.Fatalf("%d answers", len(m.Answer))
		}
		if _, err := m.Pack(); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkUDP asks over real UDP sockets (8 of them, one goroutine each)
// the server, and a bare miekg/dns server answering one fixed record (the
// floor), in turn: queries a second, and the latency's p50 and p99 in
// microseconds.
func BenchmarkUDP(b *testing.B) {
	for _, tc := range []struct {
		name    string
		handler func(b *testing.B) (dns.Handler, [][]byte)
	}{
		{"serve", func(b *testing.B) (dns.Handler, [][]byte) { return benchServer(b) }},
		{"floor", func(b *testing.B) (dns.Handler, [][]byte) {
			_, qs := benchServer(b)
			return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
				m := new(dns.Msg)
				m.SetReply(r)
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(10, 0, 0, 1)})
				w.WriteMsg(m)
			}), qs
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, qs := tc.handler(b)
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			started := make(chan struct{})
			srv := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
			go srv.ActivateAndServe()
			<-started
			defer srv.Shutdown()
			udpLoad(b, pc.LocalAddr().String(), qs, 8)
		})
	}
}

// udpLoad spreads b.N queries over sockets goroutines, each with a UDP
// socket of its own, and reports queries/s, p50-µs and p99-µs.
func udpLoad(b *testing.B, addr string, qs [][]byte, sockets int) {
	var (
		mu   sync.Mutex
		lat  []float64
		errs []error
		wg   sync.WaitGroup
	)
	per := b.N/sockets + 1
	b.ResetTimer()
	start := time.Now()
	for k := range sockets {
		wg.Go(func() {
			c, err := net.Dial("udp", addr)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer c.Close()
			buf := make([]byte, 4096)
			mine := make([]float64, 0, per)
			q := slices.Clone(qs[0])
			for i := range per {
				q = append(q[:0], qs[rand.IntN(len(qs))]...)
				id := uint16(k<<12 | i&0xfff)
				q[0], q[1] = byte(id>>8), byte(id)
				t0 := time.Now()
				c.SetDeadline(t0.Add(5 * time.Second))
				if _, err := c.Write(q); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				for {
					n, err := c.Read(buf)
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					if n >= 12 && buf[0] == q[0] && buf[1] == q[1] {
						break
					}
				}
				mine = append(mine, float64(time.Since(t0).Microseconds()))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(errs) > 0 {
		b.Fatal(errors.Join(errs...))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "queries/s")
	b.ReportMetric(lat[len(lat)/2], "p50-µs")
	b.ReportMetric(lat[min(len(lat)-1, len(lat)*99/100)], "p99-µs")
}
