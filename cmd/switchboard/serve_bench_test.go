package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// procCPU is the user+system CPU of a process of this machine.
func procCPU(pid int) time.Duration {
	d, _ := pgtest.BackendCPU(pid) // /proc/<pid>/stat: any process, not only PostgreSQL's
	return d
}

// metric reads one unlabelled counter from a server's /metrics.
func metric(url, name string) float64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// BenchmarkServe300Clients runs two `switchboard serve` processes on one
// PostgreSQL database (max_connections 100 on this machine) and 300
// `switchboard register` processes (each a Bootstrap with 1 s heartbeats
// and a 5 s TTL), half through each server, for 30 s. Reported: failures
// (heartbeat failures logged by the clients, clients that exited, instances
// not active at the end), CPU (cores) of the clients together, of each
// server and of the database's backends, PostgreSQL connections held by
// each server, heartbeats renewed per second and the statements that did
// it. Run it with -benchtime 1x.
func BenchmarkServe300Clients(b *testing.B) {
	const clients, measure = 300, 30 * time.Second
	ctx := context.Background()
	dsn, drop, err := pgtest.NewDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(drop)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	type server struct {
		p   *proc
		url string
	}
	var servers []server
	for _, name := range []string{"sb-serve-a", "sb-serve-b"} {
		p := start(b, "serve", "--dsn", dsn+sep+"application_name="+name, "--listen", "127.0.0.1:0")
		line := <-p.lines
		_, rest, ok := strings.Cut(line, "listening on ")
		if !ok {
			b.Fatalf("serve: %q %s", line, p.stderr)
		}
		url, _, _ := strings.Cut(rest, " ")
		servers = append(servers, server{p, url})
	}
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		procs := make([]*proc, clients)
		for i := range procs {
			procs[i] = start(b, "register", "--dsn", servers[i%2].url, "--name", fmt.Sprintf("client-%d", i), "--type", "worker",
				"--address", fmt.Sprintf("127.0.0.1:%d", 20000+i), "--heartbeat", "1s", "--ttl", "5s")
		}
		for i, p := range procs {
			select {
			case <-p.lines:
			case <-time.After(60 * time.Second):
				b.Fatalf("client %d never registered: %s", i, p.stderr)
			}
		}
		cat, err := switchboard.Open(ctx, dsn, switchboard.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer cat.Close()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			list, err := cat.List(ctx, switchboard.Query{Type: "worker"})
			if err == nil && len(list) == clients {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d active", len(list), clients)
			}
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		dbCPU := func() (total time.Duration, perApp map[string]int) {
			perApp = map[string]int{}
			rows, err := conn.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
			if err != nil {
				b.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var pid int
				var app string
				rows.Scan(&pid, &app)
				perApp[app]++
				total += procCPU(pid)
			}
			return total, perApp
		}
		cpu := func() (cl, a, bb, db time.Duration) {
			for _, p := range procs {
				cl += procCPU(p.cmd.Process.Pid)
			}
			db, _ = dbCPU()
			return cl, procCPU(servers[0].p.cmd.Process.Pid), procCPU(servers[1].p.cmd.Process.Pid), db
		}
		hb0 := metric(servers[0].url, "switchboard_http_heartbeats_total") + metric(servers[1].url, "switchboard_http_heartbeats_total")
		st0 := metric(servers[0].url, "switchboard_http_heartbeat_batches_total") + metric(servers[1].url, "switchboard_http_heartbeat_batches_total")
		cl0, a0, b0, db0 := cpu()
		time.Sleep(measure)
		cl1, a1, b1, db1 := cpu()
		hb1 := metric(servers[0].url, "switchboard_http_heartbeats_total") + metric(servers[1].url, "switchboard_http_heartbeats_total")
		st1 := metric(servers[0].url, "switchboard_http_heartbeat_batches_total") + metric(servers[1].url, "switchboard_http_heartbeat_batches_total")
		_, perApp := dbCPU()

		failures, shown := 0, 0
		for _, p := range procs {
			out := p.stderr.String()
			n := strings.Count(out, "heartbeat failed") + strings.Count(out, "level=ERROR")
			if n > 0 && shown < 5 {
				shown++
				b.Logf("client pid %d: %s", p.cmd.Process.Pid, out)
			}
			failures += n
			select {
			case <-p.done:
				failures++ // exited early
			default:
			}
		}
		list, err := cat.List(ctx, switchboard.Query{Type: "worker"})
		if err != nil {
			b.Fatal(err)
		}
		failures += clients - len(list)
		if failures > 0 {
			for _, s := range servers {
				b.Logf("server %s stderr: %s", s.url, s.p.stderr)
			}
		}
		sec := measure.Seconds()
		b.ReportMetric(float64(failures), "failures")
		b.ReportMetric((cl1-cl0).Seconds()/sec, "clients-cores")
		b.ReportMetric((a1-a0).Seconds()/sec, "server-a-cores")
		b.ReportMetric((b1-b0).Seconds()/sec, "server-b-cores")
		b.ReportMetric((db1-db0).Seconds()/sec, "db-cores")
		b.ReportMetric(float64(perApp["sb-serve-a"]), "conns-a")
		b.ReportMetric(float64(perApp["sb-serve-b"]), "conns-b")
		b.ReportMetric((hb1-hb0)/sec, "heartbeats/s")
		b.ReportMetric((st1-st0)/sec, "statements/s")

		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			for range p.lines {
			}
		}
	}
	b.StopTimer()
	for _, s := range servers {
		s.p.cmd.Process.Signal(syscall.SIGTERM)
	}
}
