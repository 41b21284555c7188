// Package metrics exposes Switchboard's state to Prometheus: a collector
// that reads a catalog's WatchStats (reachability, mirrored and active
// instances, drained and critical ones, watchers, self-preservation) and a
// discovery cache's staleness at scrape time.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-io/switchboard"
)

// Stale is what a discovery cache reports (discovery.Cache implements it).
type Stale interface {
	Stale() (bool, error)
}

// Collector is a prometheus.Collector for one catalog handle and, if set, one
// discovery cache.
type Collector struct {
	stats switchboard.WatchStatser
	cache Stale

	reachable, instances, active, draining, critical, watchers, preserving, held, missed, preserveEvents, cacheStale *prometheus.Desc
}

// NewCollector returns a collector reading stats (and cache, which may be
// nil) at every scrape.
func NewCollector(stats switchboard.WatchStatser, cache Stale) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("switchboard_"+name, help, nil, nil)
	}
	return &Collector{
		stats:          stats,
		cache:          cache,
		reachable:      d("catalog_reachable", "1 when the last read of the catalog succeeded, 0 during an outage."),
		instances:      d("watch_instances", "Instances mirrored by this process, stale ones included."),
		active:         d("watch_active_instances", "Instances within their TTL."),
		draining:       d("watch_draining_instances", "Instances drained: registered, out of rotation."),
		critical:       d("watch_critical_instances", "Instances whose check is critical (and not drained)."),
		watchers:       d("watchers", "Open watches in this process."),
		preserving:     d("self_preservation_active", "1 while more than the threshold fraction of the instances stopped renewing at once and their expiry is held."),
		missed:         d("self_preservation_missed_renewals", "Instances that had not renewed for half their TTL (or expired within their last TTL) at the last expiry check."),
		held:           d("self_preservation_held_expirations", "Expirations currently held by self-preservation."),
		preserveEvents: d("self_preservation_events_total", "Times self-preservation engaged."),
		cacheStale:     d("discovery_cache_stale", "1 while the discovery cache serves a set it cannot confirm."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reachable, c.instances, c.active, c.draining, c.critical, c.watchers, c.preserving, c.held, c.missed, c.preserveEvents} {
		ch <- d
	}
	if c.cache != nil {
		ch <- c.cacheStale
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats.WatchStats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.reachable, b2f(s.Healthy))
	gauge(c.instances, float64(s.Instances))
	gauge(c.active, float64(s.Active))
	gauge(c.draining, float64(s.Draining))
	gauge(c.critical, float64(s.Critical))
	gauge(c.watchers, float64(s.Watchers))
	gauge(c.preserving, b2f(s.Preserving))
	gauge(c.held, float64(s.HeldExpirations))
	gauge(c.missed, float64(s.MissedRenewals))
	ch <- prometheus.MustNewConstMetric(c.preserveEvents, prometheus.CounterValue, float64(s.SelfPreservationEvents))
	if c.cache != nil {
		stale, _ := c.cache.Stale()
		gauge(c.cacheStale, b2f(stale))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
