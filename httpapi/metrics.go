package httpapi

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/metrics"
)

// serverMetrics are the server's own Prometheus metrics, on a registry of
// its own together with the catalog collector.
type serverMetrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	registrations prometheus.Counter
	heartbeats    prometheus.Counter
	batches       prometheus.Counter
	subscribers   prometheus.Gauge
	propagation   prometheus.Histogram
	handler       http.Handler
	subs          atomic.Int64
}

func newServerMetrics(s *Server) *serverMetrics {
	m := &serverMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_http_requests_total", Help: "HTTP API requests by route and status code.",
		}, []string{"route", "code"}),
		registrations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_http_registrations_total", Help: "Registrations accepted through the API.",
		}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_http_heartbeats_total", Help: "Instances renewed through the API.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_http_heartbeat_batches_total", Help: "Catalog heartbeat calls (one statement each on the SQL backends) that renewed the gathered heartbeats.",
		}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_http_sse_subscribers", Help: "Open SSE watch streams.",
		}),
		propagation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_http_propagation_seconds",
			Help:    "From a change's last_seen (the catalog's clock) to its arrival in the server's mirror (the server's clock; includes any clock skew between them).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	m.reg.MustRegister(m.requests, m.registrations, m.heartbeats, m.batches, m.subscribers, m.propagation)
	if ws, ok := s.cat.(switchboard.WatchStatser); ok {
		m.reg.MustRegister(metrics.NewCollector(ws, nil))
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *serverMetrics) request(route string, code int) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// observe records the propagation of an added or updated instance.
func (m *serverMetrics) observe(in *switchboard.Instance) {
	if d := time.Since(in.LastSeen); d >= 0 && !in.LastSeen.IsZero() {
		m.propagation.Observe(d.Seconds())
	}
}

// subscribe counts an SSE stream opening (+1) or closing (-1).
func (m *serverMetrics) subscribe(d int64) {
	m.subs.Add(d)
	m.subscribers.Add(float64(d))
}

func (m *serverMetrics) subscriberCount() int64 { return m.subs.Load() }

func (m *serverMetrics) handle(w http.ResponseWriter, r *http.Request) error {
	m.handler.ServeHTTP(w, r)
	return nil
}
