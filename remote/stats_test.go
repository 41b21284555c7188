package remote_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/metrics"
	"github.com/switchboard-io/switchboard/remote"
)

// gauges scrapes reg and returns its gauges by name.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil {
				out[mf.GetName()] = g.GetValue()
			}
		}
	}
	return out
}

// TestWatchStatsKeepCountsWhenTheServerIsUnreachable: while the client
// cannot ask the server (its /v1/info fails), WatchStats says so (not
// healthy, the request's error) and keeps the counts of the last answer,
// so a metrics collector shows the server unreachable, not a fleet that
// dropped to zero instances. Once the server answers again, so do the
// stats.
func TestWatchStatsKeepCountsWhenTheServerIsUnreachable(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	p := testkit.NewProxy(t, strings.TrimPrefix(url, "http://"))
	writer := client(t, url, remote.Config{})
	c := client(t, "http://"+p.Addr(), remote.Config{})
	mustRegister(t, writer, inst("a"))
	mustRegister(t, writer, inst("b"))
	testkit.WaitUntil(t, "the server's stats to show both instances", func() bool {
		st := c.WatchStats()
		return st.Healthy && st.Instances == 2 && st.Active == 2
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(c, nil))

	p.Refuse()
	st := c.WatchStats()
	if st.Healthy || st.LastError == nil || st.Instances != 2 || st.Active != 2 {
		t.Fatalf("server unreachable: %+v; want unhealthy, its error, and the last counts (2 instances, 2 active)", st)
	}
	if !strings.Contains(st.LastError.Error(), p.Addr()) {
		t.Errorf("LastError %q does not name the server %s", st.LastError, p.Addr())
	}
	g := gauges(t, reg)
	if g["switchboard_catalog_reachable"] != 0 || g["switchboard_watch_instances"] != 2 || g["switchboard_watch_active_instances"] != 2 {
		t.Fatalf("metrics while the server is unreachable: %v; want reachable 0 and the last counts (2, 2)", g)
	}

	p.Restore()
	mustRegister(t, writer, inst("c"))
	testkit.WaitUntil(t, "the stats to be read again", func() bool {
		st := c.WatchStats()
		return st.Healthy && st.LastError == nil && st.Instances == 3
	})
}
