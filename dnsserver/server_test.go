package dnsserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/dnsserver"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// fleet registers the instances the name-form tests ask about.
func fleet(e *env) {
	e.register(switchboard.Instance{ID: "api-1", Name: "api", Type: "gateway", Address: "127.0.0.1:8080", Capabilities: []string{"query_execution"}})
	e.register(switchboard.Instance{ID: "api-2", Name: "api", Type: "gateway", Address: "127.0.0.2:8081"})
	e.register(switchboard.Instance{ID: "api-6", Name: "api", Type: "gateway", Address: "[::1]:9090"})
	e.register(switchboard.Instance{ID: "api-host", Name: "api", Type: "gateway", Address: "db.example.com:5432"})
	e.register(switchboard.Instance{ID: "bus-1", Name: "bus", Type: "querier", Address: "nats://flow.bus", Capabilities: []string{"query_execution"}})
	e.register(switchboard.Instance{ID: "q-1", Name: "querier", Type: "querier", Address: "10.0.0.7:7000", Capabilities: []string{"query_execution", "storage"}})
}

// Every name form, over UDP and TCP: service, RFC 2782 SRV, capability,
// type, instance and the SRV targets' addr names.
func TestNameForms(t *testing.T) {
	e := start(t, dnsserver.Options{MaxRecords: 10})
	fleet(e)
	const (
		v4a = "7f000001.addr.switchboard.:8080"
		v4b = "7f000002.addr.switchboard.:8081"
		v6  = "00000000000000000000000000000001.addr.switchboard.:9090"
		v4q = "0a000007.addr.switchboard.:7000"
	)
	for _, network := range []string{"udp", "tcp"} {
		q := func(name string, qt uint16) *dns.Msg { return e.query(network, name, qt, 0) }
		ok := dns.RcodeSuccess
		e.expect(network+" api A", q("api.service.switchboard.", dns.TypeA), ok, "127.0.0.1", "127.0.0.2")
		e.expect(network+" api AAAA", q("api.service.switchboard.", dns.TypeAAAA), ok, "::1")
		e.expect(network+" api ANY", q("api.service.switchboard.", dns.TypeANY), ok, "127.0.0.1", "127.0.0.2", "::1")
		r := q("api.service.switchboard.", dns.TypeSRV)
		e.expect(network+" api SRV", r, ok, v4a, v4b, v6, "db.example.com.:5432")
		// The targets that are IP addresses come with them.
		if got := addrs(r.Extra); strings.Join(got, " ") != "127.0.0.1 127.0.0.2 ::1" {
			t.Errorf("%s api SRV: additional %v\n%v", network, got, r)
		}
		for _, rr := range r.Answer {
			if s := rr.(*dns.SRV); s.Priority != 1 || s.Weight != switchboard.DefaultWeight || s.Hdr.Ttl != 0 {
				t.Errorf("%s api SRV: %v", network, s)
			}
		}
		e.expect(network+" _api._tcp SRV", q("_api._tcp.service.switchboard.", dns.TypeSRV), ok, v4a, v4b, v6, "db.example.com.:5432")
		e.expect(network+" _api._tcp A (SRV only)", q("_api._tcp.service.switchboard.", dns.TypeA), ok)
		e.expect(network+" cap A", q("query-execution.cap.switchboard.", dns.TypeA), ok, "127.0.0.1", "10.0.0.7")
		e.expect(network+" cap SRV", q("query-execution.cap.switchboard.", dns.TypeSRV), ok, v4a, v4q)
		e.expect(network+" type A", q("querier.type.switchboard.", dns.TypeA), ok, "10.0.0.7")
		e.expect(network+" type SRV", q("gateway.type.switchboard.", dns.TypeSRV), ok, v4a, v4b, v6, "db.example.com.:5432")
		e.expect(network+" instance A", q("api-2.instance.switchboard.", dns.TypeA), ok, "127.0.0.2")
		e.expect(network+" instance AAAA", q("api-6.instance.switchboard.", dns.TypeAAAA), ok, "::1")
		e.expect(network+" instance SRV", q("q-1.instance.switchboard.", dns.TypeSRV), ok, v4q)
		e.expect(network+" instance A of an IPv6 one", q("api-6.instance.switchboard.", dns.TypeA), ok)
		// A host name: CNAME from its instance name, left out of A.
		r = q("api-host.instance.switchboard.", dns.TypeA)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.CNAME).Target != "db.example.com." {
			t.Errorf("%s host name instance A: want a CNAME to db.example.com.\n%v", network, r)
		}
		// nats:// has no address: its names exist, with no records.
		e.expect(network+" nats service A", q("bus.service.switchboard.", dns.TypeA), ok)
		e.expect(network+" nats service SRV", q("bus.service.switchboard.", dns.TypeSRV), ok)
		e.expect(network+" nats instance A", q("bus-1.instance.switchboard.", dns.TypeA), ok)
		// SRV targets resolve.
		e.expect(network+" addr A", q("7f000002.addr.switchboard.", dns.TypeA), ok, "127.0.0.2")
		e.expect(network+" addr AAAA", q("00000000000000000000000000000001.addr.switchboard.", dns.TypeAAAA), ok, "::1")
		e.expect(network+" apex SOA", q("switchboard.", dns.TypeSOA), ok)
		if r := q("switchboard.", dns.TypeSOA); len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeSOA || !r.Authoritative {
			t.Errorf("%s apex SOA: %v", network, r)
		}
	}
}

// Every rcode: NXDOMAIN with the SOA, NOERROR with no data and the SOA,
// REFUSED outside the domain and for another class, NOTIMP for another
// opcode, FORMERR without a question, BADVERS for EDNS version 1.
func TestRcodes(t *testing.T) {
	e := start(t, dnsserver.Options{})
	fleet(e)
	q := func(name string, qt uint16) *dns.Msg { return e.query("udp", name, qt, 0) }
	nx, ok := dns.RcodeNameError, dns.RcodeSuccess
	for _, name := range []string{"nope.service.switchboard.", "_nope._tcp.service.switchboard.", "nope.cap.switchboard.",
		"nope.type.switchboard.", "nope.instance.switchboard.", "zz.addr.switchboard.", "a.b.service.switchboard.",
		"api.services.switchboard.", "other.switchboard.", "_api._udp.service.switchboard.", "storage.type.switchboard."} {
		r := q(name, dns.TypeA)
		e.expect(name, r, nx)
		if !r.Authoritative {
			t.Errorf("%s: NXDOMAIN not authoritative", name)
		}
	}
	for _, c := range []struct {
		name string
		qt   uint16
	}{{"api.service.switchboard.", dns.TypeTXT}, {"api.service.switchboard.", dns.TypeMX}, {"querier.type.switchboard.", dns.TypeAAAA},
		{"service.switchboard.", dns.TypeA}, {"cap.switchboard.", dns.TypeA}, {"_tcp.service.switchboard.", dns.TypeSRV},
		{"switchboard.", dns.TypeA}, {"switchboard.", dns.TypeNS}} {
		e.expect(c.name+" "+dns.TypeToString[c.qt], q(c.name, c.qt), ok)
	}
	for _, name := range []string{"example.com.", "switchboard.example.", "xswitchboard.", "."} {
		r := q(name, dns.TypeA)
		if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 || r.Authoritative || r.RecursionAvailable {
			t.Errorf("%s: want REFUSED, no answer, not authoritative, no recursion\n%v", name, r)
		}
	}
	m := new(dns.Msg)
	m.SetQuestion("api.service.switchboard.", dns.TypeA)
	m.Question[0].Qclass = dns.ClassCHAOS
	if r := e.exchange("udp", m); r.Rcode != dns.RcodeRefused {
		t.Errorf("class CHAOS: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	m = new(dns.Msg)
	m.SetQuestion("api.service.switchboard.", dns.TypeA)
	m.Opcode = dns.OpcodeStatus
	if r := e.exchange("udp", m); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("opcode STATUS: %s, want NOTIMP", dns.RcodeToString[r.Rcode])
	}
	m = new(dns.Msg)
	m.SetQuestion("api.service.switchboard.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	if r := e.exchange("udp", m); r.Rcode != dns.RcodeBadVers {
		t.Errorf("EDNS version 1: %s, want BADVERS", dns.RcodeToString[r.Rcode])
	}
	// No question: the server's own check answers FORMERR, and so does
	// Answer.
	m = new(dns.Msg)
	m.Id = dns.Id()
	c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
	if r, _, err := c.Exchange(m, e.addr); err != nil || r.Rcode != dns.RcodeFormatError {
		t.Errorf("no question: %v, %v; want FORMERR", r, err)
	}
	if r := e.srv.Answer(m, false); r.Rcode != dns.RcodeFormatError {
		t.Errorf("Answer without a question: %s, want FORMERR", dns.RcodeToString[r.Rcode])
	}
}

// Names are matched in any case; the answer repeats the question as
// asked; ids with capitals are found in any case.
func TestCaseInsensitive(t *testing.T) {
	e := start(t, dnsserver.Options{})
	fleet(e)
	e.register(switchboard.Instance{ID: "Worker-A", Name: "worker", Type: "Batch_Job", Address: "10.1.0.1:1", Capabilities: []string{"Query_Execution"}})
	for _, name := range []string{"API.Service.SWITCHBOARD.", "Query-Execution.CAP.switchboard.", "WORKER-A.instance.switchboard.",
		"worker-a.instance.switchboard.", "Worker-A.instance.switchboard.", "BATCH-JOB.type.switchboard."} {
		r := e.query("udp", name, dns.TypeA, 0)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Errorf("%s: %s, %d answers", name, dns.RcodeToString[r.Rcode], len(r.Answer))
			continue
		}
		for _, rr := range r.Answer {
			if rr.Header().Name != name {
				t.Errorf("%s: answer named %q", name, rr.Header().Name)
			}
		}
	}
	// Query_Execution and query_execution share the label.
	e.expect("capability of two spellings", e.query("tcp", "query-execution.cap.switchboard.", dns.TypeA, 0), dns.RcodeSuccess,
		"127.0.0.1", "10.0.0.7", "10.1.0.1")
}

// Over UDP an answer holds MaxRecords records, shuffled, every instance in
// its turn; over TCP every record.
func TestMaxRecordsAndShuffle(t *testing.T) {
	e := start(t, dnsserver.Options{})
	var all []string
	for i := range 8 {
		ip := fmt.Sprintf("10.2.0.%d", i+1)
		e.register(switchboard.Instance{ID: "w-" + ip, Name: "web", Address: ip + ":80"})
		all = append(all, ip)
	}
	e.expect("tcp", e.query("tcp", "web.service.switchboard.", dns.TypeA, 0), dns.RcodeSuccess, all...)
	seen, orders := map[string]bool{}, map[string]bool{}
	testkit.WaitUntil(t, "every instance answered over UDP, in several orders", func() bool {
		r := e.query("udp", "web.service.switchboard.", dns.TypeA, 0)
		if len(r.Answer) != 3 || r.Truncated {
			t.Fatalf("UDP: %d records, truncated %v; want 3", len(r.Answer), r.Truncated)
		}
		var order []string
		for _, rr := range r.Answer {
			ip := rr.(*dns.A).A.String()
			seen[ip] = true
			order = append(order, ip)
		}
		orders[strings.Join(order, " ")] = true
		return len(seen) == len(all) && len(orders) > 3
	})
}

// A UDP answer past 512 bytes (or the EDNS0 size offered) is cut and
// marked truncated; the client asks again over TCP and gets every record.
func TestTruncationAndTCPRetry(t *testing.T) {
	e := start(t, dnsserver.Options{MaxRecords: 1000})
	var want []string
	for i := range 60 {
		ip := fmt.Sprintf("fd00::%x", i+1)
		e.register(switchboard.Instance{ID: fmt.Sprintf("big-%d", i), Name: "big", Address: "[" + ip + "]:443"})
		want = append(want, ip)
	}
	name := "big.service.switchboard."
	r := e.query("udp", name, dns.TypeAAAA, 0)
	if !r.Truncated || len(r.Answer) >= 60 {
		t.Fatalf("UDP without EDNS0: truncated %v, %d records; want TC and fewer than 60", r.Truncated, len(r.Answer))
	}
	r.Compress = true // as the server packed it
	if n, _ := r.Pack(); len(n) > 512 {
		t.Errorf("UDP without EDNS0: %d bytes, want at most 512", len(n))
	}
	r = e.query("udp", name, dns.TypeAAAA, 1232)
	if !r.Truncated && len(r.Answer) < 60 {
		t.Errorf("UDP with EDNS0 1232: %d records, not truncated", len(r.Answer))
	}
	if r = e.query("udp", name, dns.TypeAAAA, 4096); r.Truncated || len(r.Answer) != 60 {
		t.Errorf("UDP with EDNS0 4096: truncated %v, %d records; want all 60", r.Truncated, len(r.Answer))
	}
	// What a stub resolver does on TC: the same question over TCP.
	r = e.query("udp", name, dns.TypeSRV, 0)
	if !r.Truncated {
		t.Fatalf("SRV over UDP: not truncated (%d records)", len(r.Answer))
	}
	r = e.query("tcp", name, dns.TypeSRV, 0)
	if r.Truncated || len(r.Answer) != 60 || len(addrs(r.Extra)) != 60 {
		t.Errorf("SRV over TCP: truncated %v, %d records, %d additional; want 60 each", r.Truncated, len(r.Answer), len(addrs(r.Extra)))
	}
	e.expect("AAAA over TCP", e.query("tcp", name, dns.TypeAAAA, 0), dns.RcodeSuccess, want...)
}

// A registrant that stops renewing (killed) leaves the answers once its
// TTL has passed; one that deregisters leaves them at once.
func TestExpiryAndDeregistration(t *testing.T) {
	e := start(t, dnsserver.Options{})
	e.register(switchboard.Instance{ID: "keeper", Name: "svc", Address: "10.3.0.1:1"})
	e.register(switchboard.Instance{ID: "dying", Name: "svc", Address: "10.3.0.2:1", TTL: 300 * time.Millisecond})
	e.register(switchboard.Instance{ID: "leaving", Name: "gone", Address: "10.3.0.3:1"})
	e.expect("before expiry", e.query("tcp", "svc.service.switchboard.", dns.TypeA, 0), dns.RcodeSuccess, "10.3.0.1", "10.3.0.2")
	// "dying" is never renewed, as a killed process is not.
	testkit.WaitUntil(t, "the expired instance left the answers", func() bool {
		r := e.query("tcp", "svc.service.switchboard.", dns.TypeA, 0)
		return len(r.Answer) == 1
	})
	e.expect("after expiry", e.query("tcp", "svc.service.switchboard.", dns.TypeA, 0), dns.RcodeSuccess, "10.3.0.1")
	e.expect("expired instance", e.query("udp", "dying.instance.switchboard.", dns.TypeA, 0), dns.RcodeNameError)
	if err := e.cat.Deregister(context.Background(), "leaving"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the deregistered name is NXDOMAIN", func() bool {
		return e.query("udp", "gone.service.switchboard.", dns.TypeA, 0).Rcode == dns.RcodeNameError
	})
	// A capability's label goes with its last instance.
	e.register(switchboard.Instance{ID: "c1", Name: "c", Address: "10.3.0.4:1", Capabilities: []string{"only_here"}})
	e.expect("capability", e.query("udp", "only-here.cap.switchboard.", dns.TypeA, 0), dns.RcodeSuccess, "10.3.0.4")
	if err := e.cat.Deregister(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the capability is NXDOMAIN", func() bool {
		return e.query("udp", "only-here.cap.switchboard.", dns.TypeA, 0).Rcode == dns.RcodeNameError
	})
}

// Another domain, and a TTL: records and the SOA carry it.
func TestDomainAndTTL(t *testing.T) {
	e := start(t, dnsserver.Options{Domain: "SD.Example", TTL: 30})
	if _, err := e.cat.Register(context.Background(), switchboard.Instance{ID: "x", Name: "x", Type: "t", Address: "10.4.0.1:1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	var r *dns.Msg
	testkit.WaitUntil(t, "x answered", func() bool {
		r = e.query("udp", "x.service.sd.example.", dns.TypeA, 0)
		return len(r.Answer) == 1
	})
	if r.Answer[0].Header().Ttl != 30 {
		t.Errorf("TTL %d, want 30", r.Answer[0].Header().Ttl)
	}
	r = e.query("udp", "y.service.sd.example.", dns.TypeA, 0)
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].(*dns.SOA).Minttl != 30 || r.Ns[0].Header().Name != "sd.example." {
		t.Errorf("NXDOMAIN: %v", r)
	}
	if r := e.query("udp", "x.service.switchboard.", dns.TypeA, 0); r.Rcode != dns.RcodeRefused {
		t.Errorf("the default domain, when another is set: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

// New refuses a domain that is no DNS name and a negative MaxRecords.
func TestNewRefuses(t *testing.T) {
	e := start(t, dnsserver.Options{})
	for _, o := range []dnsserver.Options{{Domain: "."}, {Domain: "a..b"}, {Domain: "a b"}, {Domain: "a\\.b"}, {MaxRecords: -1}} {
		if _, err := dnsserver.New(e.cache, o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	if _, err := dnsserver.New(nil, dnsserver.Options{}); err == nil {
		t.Error("New(nil cache): no error")
	}
	// A second server's metrics on the same registry.
	if _, err := dnsserver.New(e.cache, dnsserver.Options{Registerer: e.reg}); err == nil || !strings.Contains(err.Error(), "registered") {
		t.Errorf("second server on one registry: %v", err)
	}
}

// The metrics count queries by type and rcode, and time every answer
// once: as many observations as answered queries, the fleet's waits
// included.
func TestMetrics(t *testing.T) {
	e := start(t, dnsserver.Options{})
	fleet(e)
	e.query("udp", "api.service.switchboard.", dns.TypeA, 0)
	e.query("tcp", "api.service.switchboard.", dns.TypeSRV, 0)
	e.query("udp", "nope.service.switchboard.", dns.TypeAAAA, 0)
	e.query("udp", "example.com.", dns.TypeA, 0)
	e.query("udp", "api.service.switchboard.", dns.TypeNAPTR, 0)
	// A query is counted after its answer is written: the last may still
	// be on its way to the metrics when its answer has arrived.
	testkit.WaitUntil(t, "every answer observed", func() bool {
		return e.metric("switchboard_dns_answer_seconds") >= float64(e.sent)
	})
	for _, c := range []struct {
		typ, rcode string
		min        float64
	}{{"A", "NOERROR", 1}, {"SRV", "NOERROR", 1}, {"AAAA", "NXDOMAIN", 1}, {"A", "REFUSED", 1}, {"other", "NOERROR", 1}} {
		if got := e.metric("switchboard_dns_queries_total", "type", c.typ, "rcode", c.rcode); got < c.min {
			t.Errorf("queries type=%s rcode=%s: %v, want at least %v", c.typ, c.rcode, got, c.min)
		}
	}
	if got := e.metric("switchboard_dns_answer_seconds"); got != float64(e.sent) {
		t.Errorf("answer latency observed %v times for %d queries", got, e.sent)
	}
}
