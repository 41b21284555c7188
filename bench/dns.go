package main

// The DNS part (-parts dns): `switchboard serve --dns` over a SQLite
// catalog of -dns-instances live instances spread over -dns-names names,
// side by side with the floor: a bare miekg/dns server, in a process of
// its own, answering every query with one fixed A record. For each, a
// load generator in this process (-dns-sockets UDP sockets, one goroutine
// each, queries for random names) measures
//
//   - the most queries a second, each socket sending its next query when
//     the last is answered (closed loop), for -dns-window;
//   - the latency at -dns-rate queries a second (each socket sending on a
//     schedule, not when the last query is answered), p50 and p99, for
//     -dns-window;
//
// and then, on serve alone, how long a registration takes to be answered
// after its commit (Register returned; the name is asked over UDP until it
// is answered), and serve's resident memory: before the instances, with
// them, and after the load (which must not grow with the queries).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/switchboard-io/switchboard"
)

// dnsFloorRole is the child role of the DNS floor's server process.
const dnsFloorRole = "dns-floor"

// dnsShape is what the DNS part measures.
type dnsShape struct {
	instances, names int
	sockets          int
	rate             int
	window           time.Duration
	samples          int // registrations timed
}

// dnsRow is one server's load figures.
type dnsRow struct {
	QPS          float64 // closed loop
	RateAchieved float64 // queries a second answered at the fixed rate
	P50, P99     float64 // ms, at the fixed rate
	Errors       int64   // unanswered (timed out) or not NOERROR
}

// dnsResult is the DNS part's table.
type dnsResult struct {
	shape               dnsShape
	serve, floor        dnsRow
	propP50, propP99    float64 // ms
	propSamples         int
	propMissing         int   // registrations never answered within 5 s
	rssEmpty, rssLoaded int64 // serve's resident bytes: no instances; all of them
	rssAfter            int64 // after the load
	queriesSent         int64
	started, ended      time.Time
	loadStart, loadEnd  string
}

// dnsServer is a server process under measurement.
type dnsServer struct {
	cmd  *exec.Cmd
	addr string
	errs *tailBuffer
}

// startDNSServer runs cmd and waits for the line that says where it
// answers DNS ("DNS on ADDR," from serve, "listening on ADDR" from the
// floor).
func startDNSServer(cmd *exec.Cmd) (*dnsServer, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s := &dnsServer{cmd: cmd, errs: &tailBuffer{max: 4096}}
	cmd.Stderr = s.errs
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	found := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		var line []byte
		sent := false
		for {
			n, err := out.Read(buf)
			for _, b := range buf[:n] {
				if b != '\n' {
					line = append(line, b)
					continue
				}
				l := string(line)
				line = line[:0]
				_, rest, ok := strings.Cut(l, "DNS on ")
				if !ok && !strings.Contains(l, "http") {
					_, rest, ok = strings.Cut(l, "listening on ")
				}
				if ok && !sent {
					addr, _, _ := strings.Cut(rest, ",")
					found <- strings.TrimSpace(addr)
					sent = true
				}
			}
			if err != nil {
				if !sent {
					close(found)
				}
				return
			}
		}
	}()
	select {
	case addr, ok := <-found:
		if !ok {
			s.stop()
			return nil, fmt.Errorf("%s exited: %s", cmd.Path, s.errs)
		}
		s.addr = addr
		return s, nil
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s said nothing of DNS within 60 s: %s", cmd.Path, s.errs)
	}
}

func (s *dnsServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// rss is a process's resident memory in bytes (0 when unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// measureDNS runs the DNS part.
func measureDNS(ctx context.Context, sbBin string, shape dnsShape) (*dnsResult, error) {
	res := &dnsResult{shape: shape, started: time.Now().UTC(), loadStart: loadAvg()}
	tmp, err := os.MkdirTemp("", "switchboard-bench-dns-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dsn := "sqlite://" + filepath.Join(tmp, "catalog.db")
	log.Printf("dns: starting serve --dns (%s)", sbBin)
	sb, err := startDNSServer(exec.Command(sbBin, "--dsn", dsn, "serve", "--listen", "127.0.0.1:0", "--dns", "127.0.0.1:0"))
	if err != nil {
		return nil, err
	}
	defer sb.stop()
	res.rssEmpty = rss(sb.cmd.Process.Pid)

	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{})
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	log.Printf("dns: registering %d instances over %d names", shape.instances, shape.names)
	if err := registerDNSFleet(ctx, cat, shape); err != nil {
		return nil, err
	}
	names := make([][]byte, shape.names)
	for i := range names {
		names[i] = query(fmt.Sprintf("svc-%04d.service.switchboard.", i))
	}
	want := min(3, shape.instances/shape.names)
	if err := waitAnswered(sb.addr, names[len(names)-1], want); err != nil {
		return nil, err
	}
	res.rssLoaded = rss(sb.cmd.Process.Pid)

	floorExe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fc := exec.Command(floorExe)
	fc.Env = append(os.Environ(), roleEnv+"="+dnsFloorRole)
	floor, err := startDNSServer(fc)
	if err != nil {
		return nil, err
	}
	defer floor.stop()

	for _, s := range []struct {
		name string
		srv  *dnsServer
		row  *dnsRow
	}{{"serve --dns", sb, &res.serve}, {"the floor", floor, &res.floor}} {
		log.Printf("dns: %s: closed loop, %d sockets, %s", s.name, shape.sockets, shape.window)
		n, errs := closedLoop(s.srv.addr, names, shape.sockets, shape.window)
		s.row.QPS, s.row.Errors = float64(n)/shape.window.Seconds(), errs
		res.queriesSent += n
		log.Printf("dns: %s: %d q/s; at %d q/s for %s", s.name, int(s.row.QPS), shape.rate, shape.window)
		lat, achieved, errs := openLoop(s.srv.addr, names, shape.sockets, shape.rate, shape.window)
		s.row.P50, s.row.P99, s.row.RateAchieved = quantile(lat, 0.5), quantile(lat, 0.99), achieved
		s.row.Errors += errs
		res.queriesSent += int64(len(lat))
		log.Printf("dns: %s: p50 %.3f ms, p99 %.3f ms, %d q/s answered, %d errors", s.name, s.row.P50, s.row.P99, int(achieved), s.row.Errors)
	}
	res.rssAfter = rss(sb.cmd.Process.Pid)

	log.Printf("dns: registration → answer, %d samples", shape.samples)
	var prop []float64
	for i := range shape.samples {
		name := fmt.Sprintf("prop-%d", i)
		q := query(name + ".service.switchboard.")
		if _, err := cat.Register(ctx, switchboard.Instance{ID: name, Name: name, Type: "prop", Address: fmt.Sprintf("10.200.%d.%d:80", i/250, i%250+1), TTL: time.Hour}); err != nil {
			return nil, err
		}
		committed := time.Now()
		d, err := untilAnswered(sb.addr, q, committed, 5*time.Second)
		if err != nil {
			res.propMissing++
			continue
		}
		prop = append(prop, float64(d)/float64(time.Millisecond))
	}
	res.propP50, res.propP99, res.propSamples = quantile(prop, 0.5), quantile(prop, 0.99), len(prop)
	res.ended, res.loadEnd = time.Now().UTC(), loadAvg()
	return res, nil
}

// registerDNSFleet registers the instances: svc-NNNN names, each with
// instances/names instances on distinct IPv4 addresses.
func registerDNSFleet(ctx context.Context, cat switchboard.Catalog, shape dnsShape) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for k := range 8 {
		wg.Go(func() {
			for i := k; i < shape.instances; i += 8 {
				in := switchboard.Instance{ID: fmt.Sprintf("i-%d", i), Name: fmt.Sprintf("svc-%04d", i%shape.names), Type: "bench",
					Address: fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 1024+i%1000), Capabilities: []string{"bench_cap"}, TTL: time.Hour}
				if _, err := cat.Register(ctx, in); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// query packs an A query for name (its id is set per send).
func query(name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		panic(err) // the names are the harness's own
	}
	return b
}

// exchange sends q with id over c and reads until the reply to id; it
// returns the reply's rcode and answer count.
func exchange(c net.Conn, q []byte, id uint16, buf []byte) (rcode, answers int, err error) {
	binary.BigEndian.PutUint16(q, id)
	if _, err := c.Write(q); err != nil {
		return 0, 0, err
	}
	for {
		n, err := c.Read(buf)
		if err != nil {
			return 0, 0, err
		}
		if n >= 12 && binary.BigEndian.Uint16(buf) == id {
			return int(buf[3] & 0x0f), int(binary.BigEndian.Uint16(buf[6:])), nil
		}
	}
}

// waitAnswered waits until q is answered with at least want records.
func waitAnswered(addr string, q []byte, want int) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 4096)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c.SetDeadline(time.Now().Add(time.Second))
		if rc, n, err := exchange(c, q, uint16(rand.UintN(65536)), buf); err == nil && rc == 0 && n >= want {
			return nil
		}
	}
	return errors.New("dns: the registered instances were not answered within 5 minutes")
}

// untilAnswered asks q over UDP until it is answered, and returns the time
// from since.
func untilAnswered(addr string, q []byte, since time.Time, limit time.Duration) (time.Duration, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := make([]byte, 4096)
	for time.Since(since) < limit {
		c.SetDeadline(time.Now().Add(time.Second))
		if rc, n, err := exchange(c, q, uint16(rand.UintN(65536)), buf); err == nil && rc == 0 && n > 0 {
			return time.Since(since), nil
		}
	}
	return 0, errors.New("not answered")
}

// closedLoop runs sockets goroutines asking random names of names as fast
// as they are answered, for window; it returns the answers and the errors.
func closedLoop(addr string, names [][]byte, sockets int, window time.Duration) (answered, errs int64) {
	var wg sync.WaitGroup
	var ok, bad atomic.Int64
	end := time.Now().Add(window)
	for range sockets {
		wg.Go(func() {
			c, err := net.Dial("udp", addr)
			if err != nil {
				bad.Add(1)
				return
			}
			defer c.Close()
			qs := cloneAll(names)
			buf := make([]byte, 4096)
			var id uint16
			for time.Now().Before(end) {
				id++
				c.SetDeadline(time.Now().Add(time.Second))
				if rc, _, err := exchange(c, qs[rand.IntN(len(qs))], id, buf); err != nil || rc != 0 {
					bad.Add(1)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}

// openLoop asks at rate queries a second over sockets sockets for window,
// each socket sending on a schedule of its own (at once when it is behind
// it); each query's latency (ms) runs from its send to its answer. (Timed
// from when it was due, it would count the generator's own oversleeping on
// a loaded host, which is no part of the server's answer.)
func openLoop(addr string, names [][]byte, sockets, rate int, window time.Duration) (lat []float64, achieved float64, errs int64) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad atomic.Int64
	interval := time.Duration(float64(time.Second) * float64(sockets) / float64(rate))
	start := time.Now().Add(10 * time.Millisecond)
	for k := range sockets {
		wg.Go(func() {
			c, err := net.Dial("udp", addr)
			if err != nil {
				bad.Add(1)
				return
			}
			defer c.Close()
			qs := cloneAll(names)
			buf := make([]byte, 4096)
			var mine []float64
			due := start.Add(interval * time.Duration(k) / time.Duration(sockets))
			var id uint16
			for due.Before(start.Add(window)) {
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				id++
				sent := time.Now()
				c.SetDeadline(sent.Add(time.Second))
				if rc, _, err := exchange(c, qs[rand.IntN(len(qs))], id, buf); err != nil || rc != 0 {
					bad.Add(1)
				} else {
					mine = append(mine, float64(time.Since(sent))/float64(time.Millisecond))
				}
				due = due.Add(interval)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, float64(len(lat)) / window.Seconds(), bad.Load()
}

func cloneAll(qs [][]byte) [][]byte {
	out := make([][]byte, len(qs))
	for i, q := range qs {
		out[i] = append([]byte(nil), q...)
	}
	return out
}

// runDNSFloor is the floor's server process: a bare miekg/dns server on
// UDP, answering every query with one A record, until stopped.
func runDNSFloor() int {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a := net.IPv4(10, 0, 0, 1).To4()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET}, A: a})
		}
		w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h, UDPSize: dns.DefaultMsgSize}
	srv.NotifyStartedFunc = func() { fmt.Printf("dns-floor: listening on %s\n", pc.LocalAddr()) }
	fmt.Fprintln(os.Stderr, srv.ActivateAndServe())
	return 1
}

// printDNS writes the DNS part's table.
func printDNS(w io.Writer, r *dnsResult) {
	s := r.shape
	fmt.Fprintf(w, "### DNS interface: `serve --dns` beside a bare miekg/dns server\n\n")
	fmt.Fprintf(w, "%d live instances over %d names (SQLite catalog); queries for A of random names over %d UDP sockets from one Go process on the same host; %s per measurement. Run %s – %s UTC, load average %s → %s.\n\n",
		s.instances, s.names, s.sockets, s.window, r.started.Format("2006-01-02 15:04"), r.ended.Format("15:04"), r.loadStart, r.loadEnd)
	fmt.Fprintf(w, "| | `serve --dns` | bare miekg/dns (the floor) | target |\n|---|---:|---:|---|\n")
	ratio := r.serve.QPS / r.floor.QPS
	fmt.Fprintf(w, "| queries/s, closed loop | %s | %s | ≥ 0.8× the floor: %.2f× %s |\n", num(r.serve.QPS), num(r.floor.QPS), ratio, metOr(ratio >= 0.8))
	fmt.Fprintf(w, "| at %d q/s: answered/s | %s | %s | |\n", s.rate, num(r.serve.RateAchieved), num(r.floor.RateAchieved))
	fmt.Fprintf(w, "| at %d q/s: p50 | %.3f ms | %.3f ms | |\n", s.rate, r.serve.P50, r.floor.P50)
	fmt.Fprintf(w, "| at %d q/s: p99 | %.3f ms | %.3f ms | ≤ 1 ms %s |\n", s.rate, r.serve.P99, r.floor.P99, metOr(r.serve.P99 <= 1))
	fmt.Fprintf(w, "| errors (timeouts, not NOERROR) | %d | %d | |\n", r.serve.Errors, r.floor.Errors)
	fmt.Fprintf(w, "| registration → answered, p50 / p99 (%d samples, %d never) | %.3f / %.3f ms | | p99 ≤ 5 ms %s |\n",
		r.propSamples, r.propMissing, r.propP50, r.propP99, metOr(r.propP99 <= 5 && r.propMissing == 0))
	mb := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	perInst := float64(r.rssLoaded-r.rssEmpty) / float64(s.instances)
	fmt.Fprintf(w, "| serve's RSS: no instances / %d instances / after %d queries | %s / %s / %s | | O(instances): %.0f B per instance; %+.1f MiB over the queries |\n",
		s.instances, r.queriesSent, mb(r.rssEmpty), mb(r.rssLoaded), mb(r.rssAfter), perInst, float64(r.rssAfter-r.rssLoaded)/(1<<20))
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The load generator, serve and the floor share this host's %d cores: both columns pay for the generator alike. serve's RSS includes the whole server (HTTP API, its mirror of the catalog, the discovery cache the DNS side reads), not the DNS side alone.\n", runtime.NumCPU())
}
