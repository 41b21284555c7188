package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/metrics"
)

type fixed switchboard.WatchStats

func (f fixed) WatchStats() switchboard.WatchStats { return switchboard.WatchStats(f) }

type staleCache bool

func (s staleCache) Stale() (bool, error) { return bool(s), nil }

func TestCollector(t *testing.T) {
	c := metrics.NewCollector(fixed{Instances: 12, Active: 5, Draining: 2, Critical: 1, Watchers: 3, Healthy: true, Preserving: true,
		HeldExpirations: 7, SelfPreservationEvents: 2, MissedRenewals: 9}, staleCache(true))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `
# HELP switchboard_catalog_reachable 1 when the last read of the catalog succeeded, 0 during an outage.
# TYPE switchboard_catalog_reachable gauge
switchboard_catalog_reachable 1
# HELP switchboard_discovery_cache_stale 1 while the discovery cache serves a set it cannot confirm.
# TYPE switchboard_discovery_cache_stale gauge
switchboard_discovery_cache_stale 1
# HELP switchboard_self_preservation_active 1 while more than the threshold fraction of the instances stopped renewing at once and their expiry is held.
# TYPE switchboard_self_preservation_active gauge
switchboard_self_preservation_active 1
# HELP switchboard_self_preservation_events_total Times self-preservation engaged.
# TYPE switchboard_self_preservation_events_total counter
switchboard_self_preservation_events_total 2
# HELP switchboard_self_preservation_held_expirations Expirations currently held by self-preservation.
# TYPE switchboard_self_preservation_held_expirations gauge
switchboard_self_preservation_held_expirations 7
# HELP switchboard_self_preservation_missed_renewals Instances that had not renewed for half their TTL (or expired within their last TTL) at the last expiry check.
# TYPE switchboard_self_preservation_missed_renewals gauge
switchboard_self_preservation_missed_renewals 9
# HELP switchboard_watch_active_instances Instances within their TTL.
# TYPE switchboard_watch_active_instances gauge
switchboard_watch_active_instances 5
# HELP switchboard_watch_critical_instances Instances whose check is critical (and not drained).
# TYPE switchboard_watch_critical_instances gauge
switchboard_watch_critical_instances 1
# HELP switchboard_watch_draining_instances Instances drained: registered, out of rotation.
# TYPE switchboard_watch_draining_instances gauge
switchboard_watch_draining_instances 2
# HELP switchboard_watch_instances Instances mirrored by this process, stale ones included.
# TYPE switchboard_watch_instances gauge
switchboard_watch_instances 12
# HELP switchboard_watchers Open watches in this process.
# TYPE switchboard_watchers gauge
switchboard_watchers 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
