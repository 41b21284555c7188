// Command bench measures Switchboard side by side with etcd in one run, in
// these shapes: write churn from 12 processes, register → watcher
// latency in other processes at 1, 10 and 100 watchers, and 200 processes
// × 50 registrations renewed every second (CPU of the processes and of the
// server). It starts its own etcd (Debian's etcd-server) on loopback ports
// in a temporary directory, makes a fresh store of each system for each
// measurement, and prints the results as docs/performance.md's Markdown table on
// stdout (progress on stderr).
//
// Run it with bench/run, which installs etcd-server, starts PostgreSQL,
// builds the switchboard binary for the serve tier and passes its flags
// on. It is a module of its own so that the main module never depends on
// the etcd client, and it uses Switchboard's public API only.
//
// With -systems floor it also runs the fleet against a bare Go HTTP server
// with no catalog (floor.go): what the same traffic costs any Go tier.
//
// With -parts dns it measures `switchboard serve --dns` beside a bare
// miekg/dns server (dns.go), alone or before the other parts.
//
// With -parts checks it measures the active health checks of 10,000
// check-only instances run by one `switchboard serve` and then by two on
// one PostgreSQL database (checks.go): the servers' CPU, the probes'
// spread over time, that each check runs on one server only, and how
// long a failing target takes to leave discovery at a watcher.
//
// Children (the writers, watchers and fleet processes, and the floor's
// server) are this program run again with SWITCHBOARD_BENCH_ROLE set.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	parts, systems map[string]bool
	etcdBin, sbBin string

	churnProcs  int
	churnWindow time.Duration

	watchers   []int
	watchProcs int
	changes    int
	interval   time.Duration

	fleetProcs int
	fleet      fleetShape
	pgMargin   int
	pgProcs    int

	dns    dnsShape
	checks checksShape
}

func main() {
	switch role := os.Getenv(roleEnv); role {
	case "":
	case floorRole:
		os.Exit(runFloorServer())
	case dnsFloorRole:
		os.Exit(runDNSFloor())
	default:
		os.Exit(runChild(role))
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	var cfg config
	var parts, systems, watchers string
	flag.StringVar(&parts, "parts", "churn,latency,fleet", "measurements to run (comma-separated: churn, latency, fleet; dns: serve --dns beside a bare miekg/dns server; checks: 10,000 HTTP checks run by one serve and by two on PostgreSQL; dns and checks alone or before the others)")
	flag.StringVar(&systems, "systems", "etcd,sqlite,postgres,serve", "systems to measure (comma-separated: etcd, sqlite, postgres, serve: PostgreSQL through switchboard serve, serve-sqlite: SQLite through switchboard serve; floor: a bare Go HTTP server with no catalog; the serve ones and floor fleet only)")
	flag.StringVar(&cfg.etcdBin, "etcd", "etcd", "the etcd server binary")
	flag.StringVar(&cfg.sbBin, "switchboard", "", "the switchboard binary, for the serve tier (needed by -systems serve)")
	flag.IntVar(&cfg.churnProcs, "churn-procs", 12, "write churn: writer processes")
	flag.DurationVar(&cfg.churnWindow, "churn-window", 10*time.Second, "write churn: how long each system churns")
	flag.StringVar(&watchers, "watchers", "1,10,100", "latency: numbers of watchers (comma-separated)")
	flag.IntVar(&cfg.watchProcs, "watch-procs", 5, "latency: at most this many watcher processes, the watchers spread over them")
	flag.IntVar(&cfg.changes, "changes", 300, "latency: registrations timed per number of watchers")
	flag.DurationVar(&cfg.interval, "interval", 20*time.Millisecond, "latency: time between registrations")
	flag.IntVar(&cfg.fleetProcs, "fleet-procs", 200, "fleet: processes")
	flag.IntVar(&cfg.fleet.each, "fleet-each", 50, "fleet: registrations per process")
	reaper := flag.Bool("fleet-reaper", true, "fleet: Switchboard processes run Bootstrap's reaper (its default; false: DisableReaper)")
	flag.DurationVar(&cfg.fleet.stagger, "fleet-stagger", 25*time.Millisecond, "fleet: time between process starts")
	flag.DurationVar(&cfg.fleet.start, "fleet-start", 3*time.Minute, "fleet: how long the processes may take to register (after the last started); one not ready by then counts as failed")
	flag.DurationVar(&cfg.fleet.warmup, "fleet-warmup", 5*time.Second, "fleet: settling time after every process is ready, not measured")
	flag.DurationVar(&cfg.fleet.window, "fleet-window", 30*time.Second, "fleet: measured time")
	flag.IntVar(&cfg.pgMargin, "pg-margin", 10, "fleet on PostgreSQL: connection slots left free for other users of the server")
	flag.IntVar(&cfg.pgProcs, "pg-procs", 0, "fleet on PostgreSQL without serve: processes (0: as many as the free connection slots allow, at most -fleet-procs)")
	flag.IntVar(&cfg.dns.instances, "dns-instances", 10000, "dns: live instances")
	flag.IntVar(&cfg.dns.names, "dns-names", 1000, "dns: names the instances are spread over")
	flag.IntVar(&cfg.dns.sockets, "dns-sockets", 8, "dns: UDP sockets of the load generator")
	flag.IntVar(&cfg.dns.rate, "dns-rate", 10000, "dns: queries a second of the latency measurement")
	flag.DurationVar(&cfg.dns.window, "dns-window", 10*time.Second, "dns: how long each load runs")
	flag.IntVar(&cfg.dns.samples, "dns-samples", 200, "dns: registrations timed until answered")
	flag.IntVar(&cfg.checks.instances, "checks-instances", 10000, "checks: check-only instances, each with an HTTP check")
	flag.DurationVar(&cfg.checks.interval, "checks-interval", 10*time.Second, "checks: the checks' interval")
	flag.DurationVar(&cfg.checks.window, "checks-window", 60*time.Second, "checks: measured time of each column (one server, two), at least two intervals")
	flag.IntVar(&cfg.checks.failing, "checks-failing", 200, "checks: targets turned failing in each column, their removal timed at a watcher")
	flag.DurationVar(&cfg.checks.ttl, "checks-ttl", 0, "checks: the instances' TTL (0: the server's default)")
	flag.Parse()
	cfg.parts, cfg.systems = set(parts), set(systems)
	cfg.fleet.noReaper = !*reaper
	for _, w := range strings.Split(watchers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			log.Fatalf("-watchers: %q is not a positive number", w)
		}
		cfg.watchers = append(cfg.watchers, n)
	}
	if (cfg.systems["serve"] || cfg.systems["serve-sqlite"] || cfg.parts["dns"] || cfg.parts["checks"]) && cfg.sbBin == "" {
		log.Fatal("-systems serve needs -switchboard (the binary: go build -o DIR/switchboard ./cmd/switchboard)")
	}
	if err := run(context.Background(), cfg); err != nil {
		log.Fatal(err)
	}
}

func set(csv string) map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Split(csv, ",") {
		if s = strings.TrimSpace(s); s != "" {
			m[s] = true
		}
	}
	return m
}

// results are what the table shows, by system key.
type results struct {
	started, ended time.Time
	loadStart      string
	loadEnd        string
	etcdVersion    string
	pgVersion      string
	names          map[string]string
	order          []string // systems of the columns
	churn          map[string]churnRow
	lat            map[string]map[int]latRow
	fleet          map[string]fleetRow
	pgSlots        string
	pgFleetProcs   int
	errs           []string
}

func run(ctx context.Context, cfg config) error {
	if cfg.parts["checks"] {
		if err := cfg.checks.validate(); err != nil {
			return err
		}
	}
	if cfg.parts["dns"] {
		if cfg.dns.names < 1 || cfg.dns.instances < cfg.dns.names || cfg.dns.sockets < 1 || cfg.dns.rate < cfg.dns.sockets || cfg.dns.window <= 0 {
			return fmt.Errorf("-dns-*: want names ≥ 1, instances ≥ names, sockets ≥ 1, rate ≥ sockets, a positive window")
		}
		res, err := measureDNS(ctx, cfg.sbBin, cfg.dns)
		if err != nil {
			return fmt.Errorf("dns: %w", err)
		}
		printDNS(os.Stdout, res)
		fmt.Println()
	}
	if cfg.parts["checks"] {
		res, err := measureChecks(ctx, cfg.sbBin, cfg.checks)
		if err != nil {
			return fmt.Errorf("checks: %w", err)
		}
		printChecks(os.Stdout, res, checksArgs(os.Args[1:]))
		fmt.Println()
	}
	if !cfg.parts["churn"] && !cfg.parts["latency"] && !cfg.parts["fleet"] {
		return nil
	}
	res, err := measureAll(ctx, cfg)
	if err != nil {
		return err
	}
	printTable(os.Stdout, cfg, res)
	if len(res.errs) > 0 {
		return fmt.Errorf("%d measurements failed", len(res.errs))
	}
	return nil
}

// measureAll runs the parts of cfg on its systems. A measurement that fails
// is noted in the results' errs; setting up a system that fails is an
// error.
func measureAll(ctx context.Context, cfg config) (*results, error) {
	res := &results{started: time.Now().UTC(), loadStart: loadAvg(), names: map[string]string{},
		churn: map[string]churnRow{}, lat: map[string]map[int]latRow{}, fleet: map[string]fleetRow{}}
	tmp, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	var systems []system
	if cfg.systems["etcd"] {
		log.Printf("starting etcd (%s)", cfg.etcdBin)
		e, err := startEtcd(cfg.etcdBin)
		if err != nil {
			return nil, err
		}
		defer e.stop()
		res.etcdVersion = e.version
		log.Printf("etcd %s at %s (pid %d)", e.version, e.url, e.pid())
		systems = append(systems, etcdSystem(e))
	}
	if cfg.systems["sqlite"] {
		systems = append(systems, sqliteSystem(tmp))
	}
	var pg *pgServer
	if cfg.systems["postgres"] || cfg.systems["serve"] {
		if pg, err = connectPG(ctx); err != nil {
			return nil, err
		}
		defer pg.admin.Close(context.Background())
		_ = pg.admin.QueryRow(ctx, `SHOW server_version`).Scan(&res.pgVersion)
	}
	if cfg.systems["postgres"] {
		systems = append(systems, postgresSystem(pg, 0))
	}
	for _, s := range systems {
		res.names[s.key] = s.name
		res.order = append(res.order, s.key)
	}
	if cfg.systems["serve"] && !cfg.systems["postgres"] {
		// The serve tier's row sits in the PostgreSQL column.
		res.names["postgres"] = postgresSystem(pg, 0).name
		res.order = append(res.order, "postgres")
	}
	if cfg.systems["serve-sqlite"] && !cfg.systems["sqlite"] {
		// The serve tier's row over SQLite sits in the SQLite column.
		res.names["sqlite"] = sqliteSystem(tmp).name
		res.order = append(res.order, "sqlite")
	}
	note := func(what string, err error) {
		log.Printf("%s: %v", what, err)
		res.errs = append(res.errs, what+": "+err.Error())
	}

	if cfg.parts["churn"] {
		for _, s := range systems {
			log.Printf("write churn: %s, %d processes, %s", s.name, cfg.churnProcs, cfg.churnWindow)
			row, err := measureChurn(ctx, s, cfg.churnProcs, cfg.churnWindow)
			if err != nil {
				note("write churn on "+s.name, err)
				continue
			}
			log.Printf("  %.0f ops/s, %d errors; writers %.2f cores, server %.2f cores %s", row.OpsPerSec, row.Errors, row.ClientCores, row.ServerCores, row.FirstErr)
			res.churn[s.key] = row
		}
	}
	if cfg.parts["latency"] {
		for _, w := range cfg.watchers {
			for _, s := range systems {
				log.Printf("register → %d watchers: %s", w, s.name)
				row, err := measureLatency(ctx, s, w, cfg.watchProcs, cfg.changes, cfg.interval)
				if err != nil {
					note(fmt.Sprintf("latency at %d watchers on %s", w, s.name), err)
					continue
				}
				log.Printf("  p50 %.2f ms, p99 %.2f ms (%d samples, %d missing)", row.P50, row.P99, row.Samples, row.Missing)
				if res.lat[s.key] == nil {
					res.lat[s.key] = map[int]latRow{}
				}
				res.lat[s.key][w] = row
			}
		}
	}
	if cfg.parts["fleet"] {
		fleet := slices.Clone(systems)
		if cfg.systems["postgres"] {
			// Each process holds one connection (pool_max_conns=1): only as
			// many processes as the server has free slots.
			limit, reserved, inUse, err := pg.slots(ctx)
			if err != nil {
				return nil, err
			}
			procs := min(cfg.fleetProcs, limit-reserved-inUse-cfg.pgMargin)
			if cfg.pgProcs > 0 {
				procs = cfg.pgProcs
			}
			res.pgSlots = fmt.Sprintf("max_connections %d, %d reserved for superusers, %d in use at the start, %d left free for others: %d processes fit at one connection each",
				limit, reserved, inUse, cfg.pgMargin, procs)
			fleet = slices.DeleteFunc(fleet, func(s system) bool { return s.key == "postgres" })
			fleet = append(fleet, postgresSystem(pg, 1))
			res.pgFleetProcs = procs
		}
		if cfg.systems["serve"] {
			s := serveSystem(pg, cfg.sbBin)
			fleet = append(fleet, s)
			res.names[s.key] = s.name
		}
		if cfg.systems["serve-sqlite"] {
			s := serveSQLiteSystem(tmp, cfg.sbBin)
			fleet = append(fleet, s)
			res.names[s.key] = s.name
		}
		if cfg.systems["floor"] {
			s := floorSystem()
			fleet = append(fleet, s)
			res.names[s.key] = s.name
		}
		for _, s := range fleet {
			procs := cfg.fleetProcs
			if s.key == "postgres" {
				procs = res.pgFleetProcs
			}
			log.Printf("fleet: %s, %d processes × %d, 1 s renewals, %s measured", s.name, procs, cfg.fleet.each, cfg.fleet.window)
			row, err := measureFleet(ctx, s, procs, cfg.fleet)
			if err != nil {
				note("fleet on "+s.name, err)
				continue
			}
			log.Printf("  processes %.3f cores, server %.3f cores; %d failures (%d before the window), %d re-registrations, %d/%d live, %.0f renewals/s, %d server processes",
				row.ClientCores, row.ServerCores, row.Failures, row.StartFailures, row.Reregs, row.Live, row.Want, row.RenewalsPerSec, row.ServerProcs)
			res.fleet[s.key] = row
		}
	}
	res.ended, res.loadEnd = time.Now().UTC(), loadAvg()
	return res, nil
}

var nan = func() float64 { var z float64; return z / z }()
