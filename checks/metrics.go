package checks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-io/switchboard"
)

// Metrics are a runner's Prometheus metrics. One Metrics may serve
// several runners of a process; register its Collectors once.
type Metrics struct {
	duration *prometheus.HistogramVec
	changes  *prometheus.CounterVec
	failures *prometheus.CounterVec
	running  prometheus.Gauge
	shards   prometheus.Gauge
}

// kinds are the label values of the kind label, so that the set is fixed.
var kinds = []switchboard.CheckKind{switchboard.CheckHTTP, switchboard.CheckHTTPS, switchboard.CheckTCP, switchboard.CheckGRPC}

// NewMetrics returns a runner's metrics, unregistered.
func NewMetrics() *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_check_duration_seconds",
			Help:    "Time one probe of an active health check took, by kind (http, https, tcp, grpc).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_check_status_changes_total",
			Help: "Status changes a check runner recorded, by kind and the status changed to (passing, warning, critical).",
		}, []string{"kind", "status"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_check_failures_total",
			Help: "Probes that failed (critical), by kind.",
		}, []string{"kind"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_checks_running",
			Help: "Checks this process probes now (those of the shards it holds).",
		}),
		shards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_check_shards_held",
			Help: "Check shards whose lease this process holds.",
		}),
	}
	for _, k := range kinds {
		m.duration.WithLabelValues(string(k))
		m.failures.WithLabelValues(string(k))
	}
	return m
}

// Collectors returns every metric, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.duration, m.changes, m.failures, m.running, m.shards}
}

func (m *Metrics) probed(kind switchboard.CheckKind, d time.Duration, r Result) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(string(kind)).Observe(d.Seconds())
	if r.Status == switchboard.StatusCritical {
		m.failures.WithLabelValues(string(kind)).Inc()
	}
}

func (m *Metrics) changed(kind switchboard.CheckKind, s switchboard.Status) {
	if m != nil {
		m.changes.WithLabelValues(string(kind), string(s)).Inc()
	}
}

func (m *Metrics) addRunning(d int) {
	if m != nil {
		m.running.Add(float64(d))
	}
}

func (m *Metrics) addShards(d int) {
	if m != nil {
		m.shards.Add(float64(d))
	}
}
