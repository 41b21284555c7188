package dnsserver_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/dnsserver"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// srvWeights returns "target:port weight" of the SRV records of rrs,
// sorted.
func srvWeights(rrs []dns.RR) string {
	var out []string
	for _, rr := range rrs {
		if s, ok := rr.(*dns.SRV); ok {
			out = append(out, s.Target+":"+strconv.Itoa(int(s.Port))+" "+strconv.Itoa(int(s.Weight)))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// A draining instance and one whose check is critical are not answered,
// by any name form, and are answered again when undrained and passing; a
// name whose every instance is drained is NXDOMAIN. SRV records carry the
// weights registered (the default 100 when none), over UDP and TCP.
func TestDrainedAndCriticalNotAnswered(t *testing.T) {
	e := start(t, dnsserver.Options{MaxRecords: 10})
	ctx := context.Background()
	e.register(switchboard.Instance{ID: "big", Name: "api", Address: "10.4.0.1:80", Capabilities: []string{"web"}, Weight: 300})
	e.register(switchboard.Instance{ID: "small", Name: "api", Address: "10.4.0.2:80", Capabilities: []string{"web"}, Weight: 1})
	e.register(switchboard.Instance{ID: "plain", Name: "api", Address: "10.4.0.3:80", Capabilities: []string{"web"}})
	e.register(switchboard.Instance{ID: "max", Name: "api", Address: "10.4.0.4:80", Weight: switchboard.MaxWeight})
	e.register(switchboard.Instance{ID: "solo", Name: "lone", Address: "10.4.0.5:80"})
	for _, network := range []string{"udp", "tcp"} {
		r := e.query(network, "_api._tcp.service.switchboard.", dns.TypeSRV, 0)
		want := "0a040001.addr.switchboard.:80 300, 0a040002.addr.switchboard.:80 1, 0a040003.addr.switchboard.:80 100, 0a040004.addr.switchboard.:80 10000"
		if got := srvWeights(r.Answer); got != want {
			t.Fatalf("%s SRV weights: %s, want %s", network, got, want)
		}
		if got := srvWeights(e.query(network, "big.instance.switchboard.", dns.TypeSRV, 0).Answer); got != "0a040001.addr.switchboard.:80 300" {
			t.Fatalf("%s instance SRV weight: %s", network, got)
		}
	}

	drainer := e.cat.(switchboard.Drainer)
	if _, err := drainer.Drain(ctx, "big", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cat.(switchboard.HealthSetter).SetHealth(ctx, "small", switchboard.Health{Status: switchboard.StatusCritical, Output: "refused"}); err != nil {
		t.Fatal(err)
	}
	if _, err := drainer.Drain(ctx, "solo", true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the drained and the critical instances left the answers", func() bool {
		return len(e.query("tcp", "api.service.switchboard.", dns.TypeA, 0).Answer) == 2 &&
			e.query("udp", "lone.service.switchboard.", dns.TypeA, 0).Rcode == dns.RcodeNameError
	})
	for _, network := range []string{"udp", "tcp"} {
		q := func(name string, qt uint16) *dns.Msg { return e.query(network, name, qt, 0) }
		ok := dns.RcodeSuccess
		e.expect(network+" service A", q("api.service.switchboard.", dns.TypeA), ok, "10.4.0.3", "10.4.0.4")
		e.expect(network+" service SRV", q("_api._tcp.service.switchboard.", dns.TypeSRV), ok, "0a040003.addr.switchboard.:80", "0a040004.addr.switchboard.:80")
		e.expect(network+" capability A", q("web.cap.switchboard.", dns.TypeA), ok, "10.4.0.3")
		e.expect(network+" type A", q("svc.type.switchboard.", dns.TypeA), ok, "10.4.0.3", "10.4.0.4")
		e.expect(network+" drained instance", q("big.instance.switchboard.", dns.TypeA), dns.RcodeNameError)
		e.expect(network+" critical instance", q("small.instance.switchboard.", dns.TypeSRV), dns.RcodeNameError)
		e.expect(network+" every instance drained", q("lone.service.switchboard.", dns.TypeA), dns.RcodeNameError)
	}

	if _, err := drainer.Drain(ctx, "big", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cat.(switchboard.HealthSetter).SetHealth(ctx, "small", switchboard.Health{Status: switchboard.StatusPassing}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "undrained and passing, answered again", func() bool {
		return len(e.query("tcp", "api.service.switchboard.", dns.TypeA, 0).Answer) == 4
	})
	e.expect("undrained instance", e.query("udp", "big.instance.switchboard.", dns.TypeA, 0), dns.RcodeSuccess, "10.4.0.1")
}
