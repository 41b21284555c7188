package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
)

// printTable writes the Markdown table of res (docs/performance.md): a line
// saying when and where, then one row per measurement, one column per
// system, and the target with whether this run met it.
func printTable(w io.Writer, cfg config, res *results) {
	fmt.Fprintf(w, "Measured %s–%s UTC by `bench/run` on %d cores, load average %s at the start and %s at the end",
		res.started.Format("2006-01-02 15:04"), res.ended.Format("15:04"), runtime.NumCPU(), res.loadStart, res.loadEnd)
	var with []string
	if res.etcdVersion != "" {
		with = append(with, "etcd "+res.etcdVersion+" (Debian etcd-server, one member on loopback, fsync on)")
	}
	if res.pgVersion != "" {
		with = append(with, "PostgreSQL "+res.pgVersion)
	}
	with = append(with, "Go "+strings.TrimPrefix(runtime.Version(), "go"))
	fmt.Fprintf(w, "; %s.\n\n", strings.Join(with, ", "))

	cols := res.order
	fmt.Fprint(w, "| measure |")
	for _, k := range cols {
		fmt.Fprintf(w, " %s |", res.names[k])
	}
	fmt.Fprint(w, " target (this run) |\n|---|")
	for range cols {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprint(w, "---|\n")
	// absent is the cell of a measurement system k has no result for: a
	// column can be there for another system (serve-sqlite's is sqlite's).
	absent := func(k string) string {
		if cfg.systems[k] {
			return "failed"
		}
		return "not run"
	}
	row := func(what string, cell func(k string) string, target string) {
		fmt.Fprintf(w, "| %s |", what)
		for _, k := range cols {
			c := cell(k)
			if c == "" {
				c = "—"
			}
			fmt.Fprintf(w, " %s |", c)
		}
		fmt.Fprintf(w, " %s |\n", target)
	}

	if cfg.parts["churn"] {
		etcd, haveEtcd := res.churn["etcd"]
		row(fmt.Sprintf("write churn: %d processes, each looping register → heartbeat → deregister (4 of 5 rounds) for %s; ops/s (× etcd's)", cfg.churnProcs, cfg.churnWindow),
			func(k string) string {
				r, ok := res.churn[k]
				if !ok {
					return absent(k)
				}
				s := num(r.OpsPerSec)
				if k != "etcd" && haveEtcd && etcd.OpsPerSec > 0 {
					s += fmt.Sprintf(" (%.2f×)", r.OpsPerSec/etcd.OpsPerSec)
				}
				if r.Errors > 0 {
					s += fmt.Sprintf(", %d errors", r.Errors)
				}
				return s
			},
			verdicts(res, func(k string) (string, bool, bool) {
				r, ok := res.churn[k]
				switch {
				case k == "sqlite":
					return "SQLite ≥ 1×", ok && haveEtcd, ok && haveEtcd && r.OpsPerSec >= etcd.OpsPerSec && r.Errors == 0
				case k == "postgres":
					return "PostgreSQL ≥ 0.5×", ok && haveEtcd, ok && haveEtcd && r.OpsPerSec >= etcd.OpsPerSec/2 && r.Errors == 0
				}
				return "", false, false
			}))
		row("write churn: CPU of the writers + the server (cores)", func(k string) string {
			r, ok := res.churn[k]
			switch {
			case !ok:
				return ""
			case k == "sqlite":
				return fmt.Sprintf("%.2f (no server)", r.ClientCores)
			}
			return fmt.Sprintf("%.2f + %.2f", r.ClientCores, r.ServerCores)
		}, "—")
	}

	if cfg.parts["latency"] {
		for _, n := range cfg.watchers {
			var procs int
			for _, k := range cols {
				if r, ok := res.lat[k][n]; ok {
					procs = r.Procs
				}
			}
			etcd, haveEtcd := res.lat["etcd"][n]
			row(fmt.Sprintf("register → %d %s in %d other %s: p50 / p99 (ms)", n, plural(n, "watcher"), procs, plural(procs, "process")),
				func(k string) string {
					r, ok := res.lat[k][n]
					if !ok {
						return absent(k)
					}
					s := fmt.Sprintf("%.2f / %.2f", r.P50, r.P99)
					if r.Missing > 0 {
						s += fmt.Sprintf(", %d events missing", r.Missing)
					}
					return s
				},
				verdicts(res, func(k string) (string, bool, bool) {
					r, ok := res.lat[k][n]
					if k == "etcd" {
						return "", false, false
					}
					ok = ok && haveEtcd
					return label(k) + " ≤ etcd's", ok, ok && r.Missing == 0 && r.P50 <= etcd.P50 && r.P99 <= etcd.P99
				}))
		}
	}

	if cfg.parts["fleet"] {
		fleetCell := func(r fleetRow, server bool) string {
			if server {
				return fmt.Sprintf("%.3f + %.3f = **%.3f**", r.ClientCores, r.ServerCores, r.ClientCores+r.ServerCores)
			}
			return fmt.Sprintf("**%.3f** (no server)", r.ClientCores)
		}
		row(fmt.Sprintf("%d processes × %d registrations renewed every second (etcd: one lease per process, TTL %d s, `KeepAlive`; Switchboard: `Bootstrap`, TTL %s%s): CPU of the processes + the server = total (cores), over %s",
			cfg.fleetProcs, cfg.fleet.each, etcdFleetTTL, fleetTTL, reaperNote(cfg), cfg.fleet.window),
			func(k string) string {
				r, ok := res.fleet[k]
				if !ok {
					return absent(k)
				}
				s := fleetCell(r, k != "sqlite")
				if r.Procs != cfg.fleetProcs {
					s = fmt.Sprintf("%d processes (connection limit, below): %s", r.Procs, s)
				}
				return s
			},
			verdicts(res, func(k string) (string, bool, bool) {
				r, ok := res.fleet[k]
				if k == "etcd" {
					return "", false, false
				}
				return label(k) + " ≤ 0.5 core, 0 failures", ok, ok && r.ClientCores+r.ServerCores <= 0.5 && r.Failures == 0 && r.Lost == 0 && r.Live == r.Want
			}))
		row("the same: failures in the window (and while the processes registered, before it); registrations live at the end; renewals/s", func(k string) string {
			r, ok := res.fleet[k]
			if !ok {
				return ""
			}
			return fleetHealth(r)
		}, "0 failures")
		if res.pgSlots != "" {
			row("PostgreSQL connections, the fleet without a server tier (`pool_max_conns=1` in each process's DSN)", func(k string) string {
				if k != "postgres" {
					return ""
				}
				s := res.pgSlots
				if r, ok := res.fleet["postgres"]; ok && r.Procs > 0 {
					s += fmt.Sprintf("; measured: %d backends for %d processes (%.2f per process)", r.ServerProcs, r.Procs, float64(r.ServerProcs)/float64(r.Procs))
				}
				return s
			}, "—")
		}
		for _, tier := range []struct{ key, column, over, servers string }{
			{"serve", "postgres", "PostgreSQL", "serve and its database backends"},
			{"serve-sqlite", "sqlite", "one SQLite file", "serve, the one process that opens the file"},
		} {
			r, ok := res.fleet[tier.key]
			if !ok && !cfg.systems[tier.key] {
				continue
			}
			row(fmt.Sprintf("%d processes × %d through one `switchboard serve` over %s (clients use its `http://` DSN): CPU of the processes + %s = total (cores); failures; live; renewals/s",
				cfg.fleetProcs, cfg.fleet.each, tier.over, tier.servers),
				func(k string) string {
					switch {
					case k != tier.column:
						return ""
					case !ok:
						return absent(tier.key)
					}
					s := fmt.Sprintf("%s; %s", fleetCell(r, true), fleetHealth(r))
					if tier.key == "serve" {
						s += fmt.Sprintf("; %d database connections", r.ServerProcs-1)
					}
					return s
				},
				func() string {
					if !ok {
						return "≤ 0.5 core: not measured"
					}
					return "≤ 0.5 core, 0 failures: " + metOr(r.ClientCores+r.ServerCores <= 0.5 && r.Failures == 0 && r.Lost == 0 && r.Live == r.Want)
				}())
		}
	}
	if r, ok := res.fleet["floor"]; ok && cfg.parts["fleet"] {
		fmt.Fprintf(w, "\nThe floor, with no catalog: %d processes × %d ids, each process sending its ids in one JSON POST a second over `net/http` to a bare Go HTTP server that keeps them in a map: CPU of the processes + the server = %.3f + %.3f = **%.3f** cores; %s.\n",
			r.Procs, r.Each, r.ClientCores, r.ServerCores, r.ClientCores+r.ServerCores, fleetHealth(r))
	}
	for _, e := range res.errs {
		fmt.Fprintf(w, "\nFailed: %s\n", e)
	}
}

func fleetHealth(r fleetRow) string {
	s := fmt.Sprintf("%d failures (%d before the window); %s of %s live; %s/s", r.Failures, r.StartFailures, num(float64(r.Live)), num(float64(r.Want)), num(r.RenewalsPerSec))
	if r.Lost > 0 {
		s += fmt.Sprintf("; **%d processes failed to start**", r.Lost)
	}
	if r.Reregs > 0 {
		s += fmt.Sprintf("; %d re-registrations", r.Reregs)
	}
	return s
}

// verdicts joins each system's target with whether it was met.
func verdicts(res *results, v func(k string) (what string, measured, met bool)) string {
	var out []string
	for _, k := range res.order {
		what, measured, met := v(k)
		if what == "" {
			continue
		}
		if !measured {
			out = append(out, what+": not measured")
			continue
		}
		out = append(out, what+": "+metOr(met))
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, "; ")
}

func metOr(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}

func label(k string) string {
	switch k {
	case "sqlite":
		return "SQLite"
	case "postgres":
		return "PostgreSQL"
	}
	return k
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	if strings.HasSuffix(s, "s") {
		return s + "es"
	}
	return s + "s"
}

// num formats x rounded, with thousands separators.
func num(x float64) string {
	if math.IsNaN(x) {
		return "?"
	}
	s := strconv.FormatInt(int64(math.Round(x)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func reaperNote(cfg config) string {
	if cfg.fleet.noReaper {
		return ", reaper off"
	}
	return ", each process's reaper on (the default)"
}
