package dnsserver_test

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/dnsserver"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

// env is a DNS server on 127.0.0.1 answering from a cache of a SQLite
// catalog.
type env struct {
	t     testing.TB
	cat   switchboard.Catalog
	cache *discovery.Cache
	srv   *dnsserver.Server
	reg   *prometheus.Registry
	addr  string // host:port, the same for UDP and TCP
	sent  int    // queries exchanged (answered), for the metrics test
}

func start(t testing.TB, opts dnsserver.Options) *env {
	t.Helper()
	cat := testkit.OpenSQLite(t)
	cache, err := discovery.New(context.Background(), cat, discovery.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	opts.Logger = slog.New(slog.DiscardHandler)
	srv, err := dnsserver.New(cache, opts)
	if err != nil {
		t.Fatal(err)
	}
	pc, ln, err := dnsserver.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(pc, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &env{t: t, cat: cat, cache: cache, srv: srv, reg: reg, addr: pc.LocalAddr().String()}
}

// register stores in (a TTL of an hour unless set) and waits until the DNS
// server answers its instance name.
func (e *env) register(in switchboard.Instance) switchboard.Instance {
	e.t.Helper()
	if in.TTL == 0 {
		in.TTL = time.Hour
	}
	if in.Type == "" {
		in.Type = "svc"
	}
	out, err := e.cat.Register(context.Background(), in)
	if err != nil {
		e.t.Fatal(err)
	}
	testkit.WaitUntil(e.t, in.ID+" answered", func() bool {
		return e.query("udp", in.ID+".instance.switchboard.", dns.TypeSRV, 0).Rcode == dns.RcodeSuccess
	})
	return out
}

// query asks name over network ("udp" or "tcp"), with EDNS0 offering
// ednsSize bytes when it is not zero.
func (e *env) query(network, name string, qtype uint16, ednsSize uint16) *dns.Msg {
	e.t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if ednsSize != 0 {
		m.SetEdns0(ednsSize, false)
	}
	return e.exchange(network, m)
}

func (e *env) exchange(network string, m *dns.Msg) *dns.Msg {
	e.t.Helper()
	c := &dns.Client{Net: network, Timeout: 10 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, e.addr)
	if err != nil {
		e.t.Fatalf("%s %s %s: %v", network, m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err)
	}
	if r.Id != m.Id || !r.Response {
		e.t.Fatalf("not a reply to the query: %v", r)
	}
	e.sent++
	return r
}

// addrs returns the addresses of the A and AAAA records of rrs, sorted.
func addrs(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	sort.Strings(out)
	return out
}

// srvs returns "target:port" of the SRV records of rrs, sorted.
func srvs(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok {
			out = append(out, s.Target+":"+strconv.Itoa(int(s.Port)))
		}
	}
	sort.Strings(out)
	return out
}

// hasSOA reports whether the authority section holds the zone's SOA.
func hasSOA(r *dns.Msg, zone string) bool {
	return slices.ContainsFunc(r.Ns, func(rr dns.RR) bool {
		soa, ok := rr.(*dns.SOA)
		return ok && soa.Hdr.Name == zone
	})
}

// expect checks r's rcode and that its answers' addresses are want (nil:
// no answer), and that a reply without answers carries the SOA.
func (e *env) expect(what string, r *dns.Msg, rcode int, want ...string) {
	e.t.Helper()
	if r.Rcode != rcode {
		e.t.Errorf("%s: rcode %s, want %s\n%v", what, dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode], r)
		return
	}
	got := addrs(r.Answer)
	if len(got) == 0 {
		got = srvs(r.Answer)
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		e.t.Errorf("%s: answer %v, want %v\n%v", what, got, want, r)
	}
	if len(r.Answer) == 0 && !hasSOA(r, "switchboard.") {
		e.t.Errorf("%s: no answer and no SOA in the authority section\n%v", what, r)
	}
}

// metric returns the value of the counter or histogram count name whose
// labels include labels (name=value pairs), summed over the series.
func (e *env) metric(name string, labels ...string) float64 {
	e.t.Helper()
	fams, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
