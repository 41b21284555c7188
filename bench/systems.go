package main

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// A system is one column of the table: it makes a fresh, empty store for
// each measurement and says which server processes serve it.
type system struct {
	key  string // etcd, sqlite, postgres, serve
	name string // as the table shows it
	// fresh makes an empty store; pids lists the server processes whose
	// CPU counts as the server's (none for SQLite); cleanup removes it.
	fresh func(ctx context.Context, label string) (st store, pids func() []int, cleanup func(), err error)
}

var stores atomic.Int64

func etcdSystem(s *etcdServer) system {
	return system{key: "etcd", name: "etcd " + s.version, fresh: func(_ context.Context, label string) (store, func() []int, func(), error) {
		st := store{Kind: "etcd", DSN: s.url, Prefix: fmt.Sprintf("/bench/%d-%s", stores.Add(1), label)}
		return st, func() []int { return []int{s.pid()} }, func() {}, nil
	}}
}

func sqliteSystem(dir string) system {
	return system{key: "sqlite", name: "Switchboard SQLite", fresh: func(_ context.Context, label string) (store, func() []int, func(), error) {
		sub := filepath.Join(dir, fmt.Sprintf("%d-%s", stores.Add(1), label))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return store{}, nil, nil, err
		}
		st := store{Kind: "switchboard", DSN: "sqlite://" + filepath.Join(sub, "catalog.db")}
		return st, func() []int { return nil }, func() { os.RemoveAll(sub) }, nil
	}}
}

// pgServer is the PostgreSQL server the run uses: an admin connection to
// create and drop databases and find their backends.
type pgServer struct {
	admin *pgx.Conn
}

func connectPG(ctx context.Context) (*pgServer, error) {
	conn, err := pgx.Connect(ctx, pgtest.AdminDSN())
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %w (set %s)", pgtest.AdminDSN(), err, pgtest.EnvDSN)
	}
	return &pgServer{admin: conn}, nil
}

// database makes a throwaway database (pgtest.NewDatabase: dropped with its
// connections by drop) and returns its DSN and name.
func (p *pgServer) database(ctx context.Context) (dsn, name string, drop func(), err error) {
	dsn, drop, err = pgtest.NewDatabase(ctx)
	if err != nil {
		return "", "", nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		drop()
		return "", "", nil, err
	}
	return dsn, strings.TrimPrefix(u.Path, "/"), drop, nil
}

// backends lists the server processes connected to database db.
func (p *pgServer) backends(db string) []int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := p.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, db)
	if err != nil {
		return nil
	}
	pids, _ := pgx.CollectRows(rows, pgx.RowTo[int])
	return pids
}

// slots reports max_connections, the slots reserved for superusers, and the
// client connections open now (every database: other users included).
func (p *pgServer) slots(ctx context.Context) (limit, reserved, inUse int, err error) {
	err = p.admin.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int,
		(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int`).Scan(&limit, &reserved, &inUse)
	return
}

func postgresSystem(p *pgServer, poolMax int) system {
	return system{key: "postgres", name: "Switchboard PostgreSQL", fresh: func(ctx context.Context, _ string) (store, func() []int, func(), error) {
		dsn, db, drop, err := p.database(ctx)
		if err != nil {
			return store{}, nil, nil, err
		}
		if poolMax > 0 {
			dsn = withParam(dsn, "pool_max_conns", fmt.Sprint(poolMax))
		}
		return store{Kind: "switchboard", DSN: dsn}, func() []int { return p.backends(db) }, drop, nil
	}}
}

// serveSystem is PostgreSQL behind one `switchboard serve` (bin): clients
// use its http:// DSN; the server's CPU is the serve process's and its
// database backends'.
func serveSystem(p *pgServer, bin string) system {
	return system{key: "serve", name: "Switchboard PostgreSQL via `serve`", fresh: func(ctx context.Context, _ string) (store, func() []int, func(), error) {
		dsn, db, drop, err := p.database(ctx)
		if err != nil {
			return store{}, nil, nil, err
		}
		return startServe(bin, dsn, func() []int { return p.backends(db) }, drop)
	}}
}

// serveSQLiteSystem is a SQLite file behind one `switchboard serve`: the one
// process that opens the file; clients use its http:// DSN.
func serveSQLiteSystem(dir, bin string) system {
	return system{key: "serve-sqlite", name: "Switchboard SQLite via `serve`", fresh: func(_ context.Context, label string) (store, func() []int, func(), error) {
		sub := filepath.Join(dir, fmt.Sprintf("%d-%s", stores.Add(1), label))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return store{}, nil, nil, err
		}
		return startServe(bin, "sqlite://"+filepath.Join(sub, "catalog.db"), func() []int { return nil }, func() { os.RemoveAll(sub) })
	}}
}

// startServe runs `bin --dsn dsn serve` on a free loopback port and returns
// its http:// store; the server's processes are serve's and those others
// lists; cleanup runs after serve has stopped.
func startServe(bin, dsn string, others func() []int, cleanup func()) (store, func() []int, func(), error) {
	return startServer(exec.Command(bin, "--dsn", dsn, "serve", "--listen", "127.0.0.1:0"), "switchboard", others, cleanup)
}

// startServer runs cmd, a server whose first line on stdout says
// "listening on URL", and returns the store of kind at that URL; the
// server's processes are cmd's and those others lists; cleanup runs after
// cmd has stopped.
func startServer(cmd *exec.Cmd, kind string, others func() []int, cleanup func()) (store, func() []int, func(), error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errs := &tailBuffer{max: 4096}
	cmd.Stderr = errs
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		cleanup()
		return store{}, nil, nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	stopServe := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		cleanup()
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-lines:
		_, rest, ok := strings.Cut(l, "listening on ")
		if !ok {
			stopServe()
			return store{}, nil, nil, fmt.Errorf("%s: %q %s", cmd.Path, l, errs)
		}
		u, _, _ := strings.Cut(rest, " ")
		pids := func() []int { return append(others(), cmd.Process.Pid) }
		return store{Kind: kind, DSN: u}, pids, stopServe, nil
	case <-time.After(60 * time.Second):
		stopServe()
		return store{}, nil, nil, fmt.Errorf("%s did not start: %s", cmd.Path, errs)
	}
}

// withParam adds a query parameter to a URL DSN.
func withParam(dsn, k, v string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + url.QueryEscape(k) + "=" + url.QueryEscape(v)
}

// cpuOf sums the CPU of pids now, by pid.
func cpuOf(pids []int) map[int]time.Duration {
	m := make(map[int]time.Duration, len(pids))
	for _, p := range pids {
		m[p] = procCPU(p)
	}
	return m
}

// cpuDelta is the CPU the processes of after spent since before (a process
// not in before counts from its start; one gone by after is not counted).
func cpuDelta(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for p, t := range after {
		d += t - before[p]
	}
	return d
}
