package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
)

// TestServeDNS: serve --dns answers from the catalog over UDP and TCP
// under --dns-domain, and its /metrics counts the queries beside the
// API's metrics.
func TestServeDNS(t *testing.T) {
	dsn, _ := dsnIn(t)
	p := start(t, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--dns", "127.0.0.1:0", "--dns-domain", "sd.test")
	var url, dnsAddr string
	for url == "" || dnsAddr == "" {
		line := p.line(t)
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
		if _, rest, ok := strings.Cut(line, "DNS on "); ok {
			dnsAddr, _, _ = strings.Cut(rest, ",")
			if !strings.Contains(line, "domain sd.test.") {
				t.Errorf("DNS line %q does not name the domain", line)
			}
		}
	}
	cat := openCatalog(t, dsn)
	if _, err := cat.Register(context.Background(), switchboard.Instance{ID: "api-1", Name: "api", Type: "gateway",
		Address: "127.0.0.9:8080", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ask := func(network, name string, qt uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qt)
		r, _, err := (&dns.Client{Net: network, Timeout: 10 * time.Second}).Exchange(m, dnsAddr)
		if err != nil {
			t.Fatalf("%s %s: %v", network, name, err)
		}
		return r
	}
	waitFor(context.Background(), func() bool { return len(ask("udp", "api.service.sd.test.", dns.TypeA).Answer) == 1 })
	for _, network := range []string{"udp", "tcp"} {
		r := ask(network, "api.service.sd.test.", dns.TypeA)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.9" {
			t.Fatalf("%s: %v", network, r)
		}
	}
	if r := ask("udp", "api.service.switchboard.", dns.TypeA); r.Rcode != dns.RcodeRefused {
		t.Errorf("outside --dns-domain: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`switchboard_dns_queries_total{rcode="NOERROR",type="A"}`, `switchboard_dns_queries_total{rcode="REFUSED",type="A"}`,
		"switchboard_dns_answer_seconds_bucket", "switchboard_http_sse_subscribers"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, p.stderr)
	}
}

// A wrong --dns or [dns] value is a usage error naming it; an address
// taken is an error at start.
func TestServeDNSInvalid(t *testing.T) {
	dsn, _ := dsnIn(t)
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--dns", "8600"}, "", "--dns"},
		{[]string{"--dns", "127.0.0.1:0", "--dns-domain", "bad_domain"}, "", "--dns-domain"},
		{[]string{"--dns", "127.0.0.1:0"}, "SWITCHBOARD_DNS_MAX_RECORDS=0", "SWITCHBOARD_DNS_MAX_RECORDS"},
	} {
		if tc.env != "" {
			k, v, _ := strings.Cut(tc.env, "=")
			t.Setenv(k, v)
		}
		code, _, stderr := cli(t, append([]string{"serve", "--dsn", dsn, "--listen", "127.0.0.1:0"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v %s: exit %d stderr %q", tc.args, tc.env, code, stderr)
		}
		if tc.env != "" {
			k, _, _ := strings.Cut(tc.env, "=")
			t.Setenv(k, "")
		}
	}
}
