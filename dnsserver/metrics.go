package dnsserver

import (
	"errors"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// serverMetrics are the DNS interface's Prometheus metrics.
type serverMetrics struct {
	queries   *prometheus.CounterVec
	latency   prometheus.Histogram
	malformed prometheus.Counter
}

func newServerMetrics() *serverMetrics {
	return &serverMetrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_dns_queries_total",
			Help: "DNS queries answered, by the type asked (A, AAAA, SRV, ANY, CNAME, SOA, NS, TXT, PTR, MX, other; none without a question) and the answer's rcode.",
		}, []string{"type", "rcode"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_dns_answer_seconds",
			Help:    "From a DNS query's arrival at the handler to its answer's write.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .1},
		}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_dns_malformed_total",
			Help: "DNS packets dropped unanswered because they did not parse.",
		}),
	}
}

func (m *serverMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.queries, m.latency, m.malformed}
}

// register registers every metric with r, or none.
func (m *serverMetrics) register(r prometheus.Registerer) error {
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := r.Register(c); err != nil {
			for _, d := range done {
				r.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return errors.New("another DNS server's metrics are registered there already")
			}
			return err
		}
		done = append(done, c)
	}
	return nil
}

func (m *serverMetrics) unregister(r prometheus.Registerer) {
	for _, c := range m.collectors() {
		r.Unregister(c)
	}
}

// typeLabels are the query types counted by name; any other is "other",
// so that a client cannot make the label set grow.
var typeLabels = map[uint16]string{
	dns.TypeA: "A", dns.TypeAAAA: "AAAA", dns.TypeSRV: "SRV", dns.TypeANY: "ANY", dns.TypeCNAME: "CNAME",
	dns.TypeSOA: "SOA", dns.TypeNS: "NS", dns.TypeTXT: "TXT", dns.TypePTR: "PTR", dns.TypeMX: "MX",
}

// observe counts query r answered with m in d.
func (m *serverMetrics) observe(r, answer *dns.Msg, d time.Duration) {
	typ := "none"
	if len(r.Question) > 0 {
		if typ = typeLabels[r.Question[0].Qtype]; typ == "" {
			typ = "other"
		}
	}
	rcode := dns.RcodeToString[answer.Rcode]
	if rcode == "" {
		rcode = "other"
	}
	m.queries.WithLabelValues(typ, rcode).Inc()
	m.latency.Observe(d.Seconds())
}
