package main

import (
	"context"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/checks"
	"github.com/switchboard-io/switchboard/config"
)

// serveChecks runs serve's share of the catalog's active health checks
// until ctx ends or stop is called. A catalog that does not store check
// results runs none (a warning says so). It returns what stops the runner,
// and a wrapper of the HTTP handler that adds the checks' metrics to its
// /metrics.
func serveChecks(ctx context.Context, g *globals, c config.Config, cat switchboard.Catalog) (stop func(), withMetrics func(http.Handler) http.Handler) {
	reg := prometheus.NewRegistry()
	m := checks.NewMetrics()
	reg.MustRegister(m.Collectors()...)
	withMetrics = func(h http.Handler) http.Handler { return metricsWith(h, reg) }
	policy := c.Checks.Policy()
	r, err := checks.New(cat, checks.Options{Policy: policy, Metrics: m, Logger: g.log})
	if err != nil {
		g.log.Warn("serve: not running checks", "err", err)
		return func() {}, withMetrics
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := r.Run(rctx); err != nil {
			g.log.Warn("serve: the check runner stopped", "err", err)
		}
	}()
	g.log.Info("serve: running checks", "identity", r.Identity(), "allow", policy.String())
	return func() { cancel(); wg.Wait() }, withMetrics
}
