package main

// The checks part's table.

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"
)

// joinCores writes the servers' cores and, for more than one, their sum.
func joinCores(cs []float64) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%.3f", c)
	}
	if len(cs) == 1 {
		return parts[0]
	}
	return fmt.Sprintf("%s = %.3f", strings.Join(parts, " + "), sum(cs))
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// checksArgs are the flags the harness was given, less those bench/run
// adds (-etcd, -switchboard): what to type after bench/run.
func checksArgs(args []string) string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if n, _, ok := strings.Cut(name, "="); ok {
			if n == "etcd" || n == "switchboard" {
				continue
			}
		} else if name == "etcd" || name == "switchboard" {
			i++
			continue
		}
		out = append(out, a)
	}
	return strings.Join(append([]string{"bench/run"}, out...), " ")
}

// printChecks writes the checks part's table.
func printChecks(w io.Writer, r *checksResult, command string) {
	s := r.shape
	perCheck := s.window.Seconds() / s.interval.Seconds()
	target := s.interval*checksFailures + time.Second
	fmt.Fprintf(w, "### Active health checks: %s HTTP checks at %s, one `serve` and two\n\n", num(float64(s.instances)), s.interval)
	ttl := "the server's default TTL"
	if s.ttl > 0 {
		ttl = "TTL " + s.ttl.String()
	}
	fmt.Fprintf(w, "%s check-only instances (%s, renewed by the runner that probes them) registered through "+
		"`serve`'s HTTP API in %.1f s, each with an HTTP check (failures %d) of its own path on %d listeners "+
		"of the harness on 127.0.0.1; PostgreSQL %s, a fresh database; every check passing %.1f s after the "+
		"last registration. One server, then a second started on the same database (shards settled in %.1f s, "+
		"then one interval more). %s measured per column, %d targets turned failing (HTTP 500) at times "+
		"spread over it, their removal timed at a watcher through the first server. Run %s – %s UTC, load "+
		"average %s → %s, `%s`.\n\n",
		num(float64(s.instances)), ttl, r.register.Seconds(), checksFailures, checksListeners, r.pgVersion,
		r.ready.Seconds(), r.settle.Seconds(), s.window, s.failing, r.started.Format("2006-01-02 15:04"),
		r.ended.Format("15:04"), r.loadStart, r.loadEnd, command)
	fmt.Fprintf(w, "| measure | one server | two servers | target |\n|---|---:|---:|---|\n")
	cols := []checksColumn{r.one, r.two}
	row := func(what string, cell func(c checksColumn) string, target string) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", what, cell(cols[0]), cell(cols[1]), target)
	}
	row("probes served a second", func(c checksColumn) string { return num(c.probesPerSec) },
		fmt.Sprintf("%s scheduled", num(float64(s.instances)/s.interval.Seconds())))
	row("checks running, per server (shards held)", func(c checksColumn) string {
		var p []string
		for k := range c.running {
			p = append(p, fmt.Sprintf("%s (%d)", num(float64(c.running[k])), c.shards[k]))
		}
		return strings.Join(p, " + ")
	}, "")
	cpuTarget := "≤ 0.25 cores at 1,000 probes/s: not this shape"
	if float64(s.instances)/s.interval.Seconds() == 1000 {
		cpuTarget = "≤ 0.25 cores at 1,000 probes/s: " + metOr(sum(r.one.serveCores) <= 0.25 && sum(r.two.serveCores) <= 0.25)
	}
	row("`serve` CPU (every server, all it does)", func(c checksColumn) string { return joinCores(c.serveCores) + " cores" }, cpuTarget)
	row("PostgreSQL backends' CPU", func(c checksColumn) string { return fmt.Sprintf("%.3f cores", c.pgCores) }, "")
	row("the harness's CPU (targets, watcher)", func(c checksColumn) string { return fmt.Sprintf("%.3f cores", c.selfCores) }, "")
	herdOK := r.one.busiest <= 2 && r.two.busiest <= 2
	row("probes per 100 ms over the mean: busiest / 99th percentile / quietest", func(c checksColumn) string {
		return fmt.Sprintf("%.2f / %.2f / %.2f", c.busiest, c.p99Bucket, c.quietest)
	}, fmt.Sprintf("busiest ≤ 2: %s", metOr(herdOK)))
	row("the harness's longest pause (a 20 ms ticker's lateness)", func(c checksColumn) string {
		return fmt.Sprintf("%.0f ms", c.pause)
	}, "")
	row(fmt.Sprintf("probes of a check in the window (%.0f expected): checks", perCheck),
		func(c checksColumn) string { return countsText(c.once.Counts) }, "")
	onceOK := r.one.once.Twice == 0 && r.two.once.Twice == 0
	row(fmt.Sprintf("checks probed by more than one runner (over %.0f probes in the window, or two under %s apart)", perCheck+1, s.interval/2),
		func(c checksColumn) string {
			return fmt.Sprintf("%d (closest two: %.2f s)", c.once.Twice, c.once.MinGap)
		},
		fmt.Sprintf("0: %s", metOr(onceOK)))
	detectOK := true
	for _, c := range cols {
		detectOK = detectOK && c.missing == 0 && quantile(c.detect, .99) <= target.Seconds()
	}
	row("failing target → removed at the watcher: p50 / p99 / max", func(c checksColumn) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f s (%d of %d)", quantile(c.detect, .5), quantile(c.detect, .99), quantile(c.detect, 1),
			len(c.detect), len(c.detect)+c.missing)
	}, fmt.Sprintf("p99 ≤ interval × failures + 1 s = %s: %s", target, metOr(detectOK)))
	row(fmt.Sprintf("probe %d of a failing target → removed at the watcher: p50 / p99", checksFailures), func(c checksColumn) string {
		return fmt.Sprintf("%.0f / %.0f ms", quantile(c.propagate, .5), quantile(c.propagate, .99))
	}, "")
	wrongOK := true
	row("instances removed that were not failing", func(c checksColumn) string {
		n := 0
		var p []string
		for _, reason := range slices.Sorted(maps.Keys(c.wrong)) {
			n += c.wrong[reason]
			p = append(p, fmt.Sprintf("%d %s", c.wrong[reason], reason))
		}
		wrongOK = wrongOK && n == 0
		if n == 0 {
			return "0"
		}
		return strings.Join(p, ", ")
	}, "0")
	row("probes failed that the target did not fail (timeouts, refused)", func(c checksColumn) string {
		return num(c.failedProbes - float64(c.served500))
	}, "")
	fmt.Fprintf(w, "| Consul, the same shape | not measured here | not measured here | — |\n\n")
	fmt.Fprintf(w, "Consul: %s.\n\n", checksConsulNote)
	if !wrongOK {
		fmt.Fprintln(w, "Some instances whose targets never failed left discovery: see the row above.")
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "`serve` CPU is the whole process: the probes, the status changes, the renewals of the check-only "+
		"rows, the shard leases and the watcher's stream. The harness, PostgreSQL and the servers share this "+
		"host's %d cores.\n", runtime.NumCPU())
}
