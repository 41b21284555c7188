package dnsserver_test

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/dnsserver"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// packed is q packed, for the seeds.
func packed(tb testing.TB, name string, qt uint16, edns bool) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qt)
	if edns {
		m.SetEdns0(1232, true)
	}
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzAnswer feeds any packet to the handler: whatever parses is answered
// with a reply that packs, repeats the query's id and question, and fits
// the size the query allows; nothing panics.
func FuzzAnswer(f *testing.F) {
	e := start(f, dnsserver.Options{})
	fleet(e)
	for _, s := range []struct {
		name string
		qt   uint16
	}{{"api.service.switchboard.", dns.TypeA}, {"_api._tcp.service.switchboard.", dns.TypeSRV}, {"API-host.instance.switchboard.", dns.TypeANY},
		{"query-execution.cap.switchboard.", dns.TypeAAAA}, {"7f000001.addr.switchboard.", dns.TypeA}, {"nope.switchboard.", dns.TypeTXT},
		{"example.com.", dns.TypeA}, {"switchboard.", dns.TypeSOA}, {`a\.b.instance.switchboard.`, dns.TypeA}} {
		f.Add(packed(f, s.name, s.qt, false), false)
		f.Add(packed(f, s.name, s.qt, true), true)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, false) // a name pointing at itself
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, pkt []byte, tcp bool) {
		r := new(dns.Msg)
		if err := r.Unpack(pkt); err != nil {
			return // the server drops it unanswered
		}
		m := e.srv.Answer(r, tcp)
		if m.Id != r.Id || !m.Response {
			t.Fatalf("reply id %d response %v to query %d", m.Id, m.Response, r.Id)
		}
		if len(r.Question) > 0 && (len(m.Question) != 1 || m.Question[0] != r.Question[0]) {
			t.Fatalf("question %v, asked %v", m.Question, r.Question)
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v\n%v", err, m)
		}
		limit := 512
		if opt := r.IsEdns0(); opt != nil {
			limit = max(512, int(opt.UDPSize()))
		}
		if tcp {
			limit = dns.MaxMsgSize
		}
		if len(b) > limit {
			t.Fatalf("reply of %d bytes, over %d", len(b), limit)
		}
	})
}

// Malformed packets over UDP and TCP, and a TCP client that sends half a
// message and stalls, neither crash nor stall the server: each is counted
// and dropped, and the next query is answered.
func TestMalformedPackets(t *testing.T) {
	e := start(t, dnsserver.Options{})
	e.register(switchboard.Instance{ID: "a", Name: "api", Address: "10.9.0.1:1"})
	udp, err := net.Dial("udp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	good := packed(t, "api.service.switchboard.", dns.TypeA, false)
	for i := range 200 {
		b := make([]byte, 1+rng.IntN(600))
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		if i%2 == 0 { // a real query cut short
			b = bytes.Clone(good[:1+rng.IntN(len(good)-1)])
		}
		if _, err := udp.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	stalled, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Write([]byte{0, 200, 1, 2, 3}) // says 200 bytes, sends 3
	junk, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte{0, 4, 0xff, 0xff, 0xff, 0xff})
	junk.Close()
	testkit.WaitUntil(t, "the malformed packets counted", func() bool {
		return e.metric("switchboard_dns_malformed_total") > 0
	})
	for _, network := range []string{"udp", "tcp"} {
		e.expect("after the junk, "+network, e.query(network, "api.service.switchboard.", dns.TypeA, 0), dns.RcodeSuccess, "10.9.0.1")
	}
	// The stalled connection is still open and holds nothing up.
	stalled.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := stalled.Read(make([]byte, 1)); err == nil {
		t.Error("the stalled connection got an answer")
	}
}
