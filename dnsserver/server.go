// Package dnsserver is Switchboard's DNS interface: it answers DNS queries
// over UDP and TCP (with github.com/miekg/dns) from a discovery cache, so
// that any program that can resolve a name can find the instances of a
// service, with no client library and no catalog query per DNS query.
//
// Under its domain (default "switchboard."), the names answered are:
//
//	<name>.service.<domain>         A, AAAA and SRV of the instances named <name>
//	_<name>._tcp.service.<domain>   SRV of the same (the RFC 2782 form)
//	<capability>.cap.<domain>       the instances having that capability
//	<type>.type.<domain>            the instances of that type
//	<id>.instance.<domain>          one instance, by id
//	<hex>.addr.<domain>             the IP address written in hex (SRV targets)
//
// A capability or a type is written as an instance name is sanitised
// (switchboard.SanitizeName: query_execution is query-execution). Names
// are matched without regard to case; an id with capital letters is found
// in any case too.
//
// Which instances are answered is decided by one predicate, Serves, which is
// switchboard.Instance.Serving: an instance is answered when it is live (not
// stale), not draining and its check (if any) is not critical. The cache's
// lookups by name, capability and type answer only those already; an
// instance asked for by id is checked with Serves. A name whose instances
// are all left out is NXDOMAIN, as one with none. Among the instances
// Serves accepts, the address decides the records: an IPv4 address gives
// A, an IPv6 one AAAA, both give SRV whose target is <hex>.addr.<domain>
// (with its A or AAAA in the additional section). An SRV record's weight
// is the instance's weight (Instance.TrafficWeight, 1 to 10,000, 100 by
// default), so a client that follows RFC 2782 spreads its calls as
// weighted picks do; every record has priority 1. A and AAAA answers do
// not weigh: the instances are answered equally often. An instance
// addressed by a host name is left out of the A and AAAA answers of service, capability and type names (a name cannot hold a
// CNAME beside other records); its SRV record targets the host name itself,
// and its <id>.instance name answers a CNAME to it. An instance addressed
// nats://subject has no IP address and no port: it is in no A, AAAA or SRV
// answer, but its names exist (NOERROR with no records, not NXDOMAIN).
//
// Answers are shuffled per query. Over UDP an answer holds at most
// MaxRecords address or SRV records (a random window of the instances, so
// every instance is answered as often as the others); over TCP every record
// that fits in a message. A UDP answer larger than 512 bytes, or than the
// EDNS0 size the query offers, is cut and marked truncated (TC), and the
// client asks again over TCP.
//
// A name under the domain that matches nothing is NXDOMAIN with the zone's
// SOA in the authority section; a name that exists without records of the
// type asked is NOERROR with no answer and the SOA; a name outside the
// domain is REFUSED (no recursion). A packet that does not parse is dropped
// and counted. When the cache is stale (its catalog unreachable), the last
// known set is answered, as every lookup of the cache does.
package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// DefaultDomain is the domain answered when Options.Domain is empty.
const DefaultDomain = "switchboard."

// DefaultMaxRecords is Options.MaxRecords when it is zero.
const DefaultMaxRecords = 3

// Options tune a Server.
type Options struct {
	// Domain is the zone answered (default "switchboard."); a trailing
	// dot is optional. Names outside it are refused.
	Domain string
	// TTL is the time to live of the records answered, and of the SOA
	// that negative answers carry, in seconds (default 0: resolvers do
	// not cache, so a change is seen at once).
	TTL uint32
	// MaxRecords is the most address or SRV records in one answer over UDP
	// (default 3). Over TCP every record that fits is answered.
	MaxRecords int
	// Registerer, if set, receives the server's Prometheus metrics:
	// switchboard_dns_queries_total by type and rcode,
	// switchboard_dns_answer_seconds, and
	// switchboard_dns_malformed_total.
	Registerer prometheus.Registerer
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
}

// Serves reports whether in should get traffic: whether DNS answers it at
// all. It is in.Serving(): not stale, not draining, check not critical.
func Serves(in *switchboard.Instance) bool { return in.Serving() }

// Server answers DNS queries from a discovery cache. It is a dns.Handler;
// Serve runs it on a UDP socket and a TCP listener.
type Server struct {
	opts    Options
	zone    string // the domain, lower case, fully qualified
	soa     *dns.SOA
	idx     *index
	m       *serverMetrics
	unsub   func()
	log     *slog.Logger
	mu      sync.Mutex
	servers []*dns.Server
	closed  bool
}

// New returns a server answering from cache. It follows the cache until
// Close. An invalid domain, or metrics that the Registerer already holds,
// are errors.
func New(cache *discovery.Cache, opts Options) (*Server, error) {
	if cache == nil {
		return nil, fmt.Errorf("dnsserver: %w: nil cache", switchboard.ErrInvalid)
	}
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	zone := strings.ToLower(dns.Fqdn(opts.Domain))
	if _, ok := dns.IsDomainName(zone); !ok || zone == "." || strings.ContainsAny(zone, `\ `) {
		return nil, &switchboard.FieldError{Field: "domain", Value: opts.Domain, Reason: "not a DNS name; want one such as switchboard or sd.example.internal"}
	}
	if opts.MaxRecords < 0 {
		return nil, &switchboard.FieldError{Field: "max records", Value: strconv.Itoa(opts.MaxRecords), Reason: "must not be negative"}
	}
	if opts.MaxRecords == 0 {
		opts.MaxRecords = DefaultMaxRecords
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := newServerMetrics()
	if opts.Registerer != nil {
		if err := m.register(opts.Registerer); err != nil {
			return nil, fmt.Errorf("dnsserver: metrics: %w", err)
		}
	}
	s := &Server{opts: opts, zone: zone, m: m, log: opts.Logger}
	s.soa = &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: opts.TTL},
		Ns:      "ns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  uint32(time.Now().Unix()),
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  opts.TTL,
	}
	s.idx, s.unsub = follow(cache)
	return s, nil
}

// Listen binds addr over UDP and TCP on the same port; with port 0, the
// port UDP was given is taken for TCP too (tried again with another when
// TCP has it already).
func Listen(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns listen %s: %w", addr, err)
	}
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns listen: %w", err)
		}
		p := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if port != "0" || try == 10 {
			return nil, nil, fmt.Errorf("dns listen: %w", err)
		}
	}
}

// Serve answers queries on pc (UDP) and ln (TCP), either of which may be
// nil, until Close; it returns once both are being served. Close closes
// them.
func (s *Server) Serve(pc net.PacketConn, ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("dnsserver: %w", switchboard.ErrClosed)
	}
	var started []chan error
	start := func(srv *dns.Server, run func() error) {
		ch := make(chan error, 1)
		var up atomic.Bool
		srv.NotifyStartedFunc = func() { up.Store(true); ch <- nil }
		started = append(started, ch)
		s.servers = append(s.servers, srv)
		go func() {
			err := run()
			switch {
			case err == nil:
			case !up.Load():
				ch <- err // Serve returns it
			default:
				s.log.Error("dns: server stopped", "err", err)
			}
		}()
	}
	if pc != nil {
		srv := &dns.Server{PacketConn: pc, Handler: s, UDPSize: dns.DefaultMsgSize, MsgInvalidFunc: s.invalid}
		start(srv, srv.ActivateAndServe)
	}
	if ln != nil {
		srv := &dns.Server{Listener: ln, Handler: s, MsgInvalidFunc: s.invalid}
		start(srv, srv.ActivateAndServe)
	}
	var errs []error
	for _, ch := range started {
		if err := <-ch; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// invalid counts a packet that did not parse (the server drops it).
func (s *Server) invalid([]byte, error) { s.m.malformed.Inc() }

// Close stops serving, closes the sockets given to Serve and stops
// following the cache. It is idempotent; the cache stays open.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		// Shutdown waits for the queries being answered.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := srv.ShutdownContext(ctx)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.unsub()
	if s.opts.Registerer != nil {
		s.m.unregister(s.opts.Registerer)
	}
	return errors.Join(errs...)
}

// ServeDNS implements dns.Handler: it answers r and records the query's
// type, rcode and latency.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	start := time.Now()
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	m := s.Answer(r, tcp)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns: writing an answer failed", "remote", w.RemoteAddr().String(), "err", err)
	}
	s.m.observe(r, m, time.Since(start))
}
