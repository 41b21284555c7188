package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/dnsserver"
)

// serveDNS starts serve's DNS interface on c.DNS.Listen (UDP and TCP),
// answering from a discovery cache of cat. It returns what stops it, and
// a wrapper of the HTTP API that adds the DNS metrics to its /metrics.
func serveDNS(ctx context.Context, g *globals, c config.Config, cat switchboard.Catalog) (stop func(), withMetrics func(http.Handler) http.Handler, err error) {
	pc, ln, err := dnsserver.Listen(c.DNS.Listen)
	if err != nil {
		return nil, nil, err
	}
	cache, err := discovery.New(ctx, cat, discovery.Options{Logger: g.log})
	if err != nil {
		pc.Close()
		ln.Close()
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	reg := prometheus.NewRegistry()
	srv, err := dnsserver.New(cache, dnsserver.Options{Domain: c.DNS.Domain, TTL: uint32(c.DNS.TTL), MaxRecords: c.DNS.MaxRecords,
		Registerer: reg, Logger: g.log})
	if err == nil {
		err = srv.Serve(pc, ln)
	}
	if err != nil {
		pc.Close()
		ln.Close()
		cache.Close()
		return nil, nil, fmt.Errorf("dns: %w", err)
	}
	zone := fqdn(c.DNS.Domain)
	fmt.Fprintf(g.stdout, "switchboard serve: DNS on %s, UDP and TCP (domain %s)\n", pc.LocalAddr(), zone)
	g.log.Info("serve: DNS listening", "addr", pc.LocalAddr().String(), "domain", zone)
	stop = func() {
		srv.Close()
		cache.Close()
	}
	return stop, func(api http.Handler) http.Handler { return metricsWith(api, reg) }, nil
}

// fqdn is a domain as DNS writes it, with its trailing dot.
func fqdn(domain string) string {
	if domain == "" || domain[len(domain)-1] != '.' {
		return domain + "."
	}
	return domain
}

// metricsWith answers GET /metrics with api's metrics followed by those
// of extra, both in the text format; every other request, and a /metrics
// request api refuses (a missing token), is api's alone. The API's
// registry is its own, so the DNS metrics are appended to its answer
// rather than registered beside them.
func metricsWith(api http.Handler, extra prometheus.Gatherer) http.Handler {
	own := promhttp.HandlerFor(extra, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			api.ServeHTTP(w, r)
			return
		}
		// Both in the plain text format, uncompressed, so that the two
		// answers join into one.
		text := r.Clone(r.Context())
		text.Header.Set("Accept", "text/plain; version=0.0.4")
		text.Header.Del("Accept-Encoding")
		first := &recorder{header: http.Header{}}
		api.ServeHTTP(first, text)
		for k, v := range first.header {
			w.Header()[k] = v
		}
		if first.status != http.StatusOK {
			w.WriteHeader(first.status)
			w.Write(first.body.Bytes())
			return
		}
		second := &recorder{header: http.Header{}}
		own.ServeHTTP(second, text)
		w.Header().Del("Content-Length")
		w.WriteHeader(http.StatusOK)
		w.Write(first.body.Bytes())
		if second.status == http.StatusOK {
			w.Write(second.body.Bytes())
		}
	})
}

// recorder keeps a handler's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
