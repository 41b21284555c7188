//go:build unix

package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// Self-preservation tried as a user would, with real `switchboard
// register` processes (TTL 2 s, heartbeat 500 ms) frozen (SIGSTOP, a
// partition: they cannot renew), resumed (SIGCONT) or killed (SIGKILL),
// plus one extra registration whose process is never frozen (its reaper
// runs), on SQLite and PostgreSQL, watched by this process.

const (
	procTTL       = 2 * time.Second
	procHeartbeat = 500 * time.Millisecond
	procCount     = 20
)

// registrar is one `switchboard register` process.
type registrar struct {
	cmd *exec.Cmd
	id  string
}

func startRegistrar(t *testing.T, dsn, name string, port int) *registrar {
	t.Helper()
	cmd := exec.Command(cli(t), "register", "--dsn", dsn, "--name", name, "--type", "writer",
		"--address", fmt.Sprintf("127.0.0.1:%d", port), "--ttl", procTTL.String(), "--heartbeat", procHeartbeat.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() {
		}
	}()
	var in switchboard.Instance
	select {
	case l, ok := <-line:
		if !ok {
			t.Fatalf("register %s printed nothing", name)
		}
		if err := json.Unmarshal([]byte(l), &in); err != nil || in.ID == "" {
			t.Fatalf("register %s printed %q: %v", name, l, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("register %s did not start within 30 s", name)
	}
	return &registrar{cmd: cmd, id: in.ID}
}

func (r *registrar) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(s); err != nil {
		t.Fatalf("signal %v: %v", s, err)
	}
}

// seen is one event as the watcher received it.
type seen struct {
	at time.Time
	ev switchboard.Event
}

// eventLog records a watch's events with their arrival time.
type eventLog struct {
	mu  sync.Mutex
	all []seen
}

func (l *eventLog) record(ch <-chan switchboard.Event) {
	for ev := range ch {
		l.mu.Lock()
		l.all = append(l.all, seen{time.Now(), ev})
		l.mu.Unlock()
	}
}

// since returns the events of kind k after position from.
func (l *eventLog) since(from int, k switchboard.EventKind) []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []seen
	for _, s := range l.all[from:] {
		if s.ev.Kind == k {
			out = append(out, s)
		}
	}
	return out
}

func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// fleet is 20 registrars, one extra, and a watch of them all.
type fleet struct {
	cat   switchboard.Catalog
	stats switchboard.WatchStatser
	procs []*registrar
	extra *registrar
	log   *eventLog
}

func startFleet(t *testing.T, backend string) *fleet {
	t.Helper()
	var dsn string
	switch backend {
	case "sqlite":
		dsn = "sqlite://" + filepath.Join(t.TempDir(), "catalog.db")
	case "postgres":
		dsn = pgtest.Schema(t, pgDSN)
	}
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{cat: cat, stats: cat.(switchboard.WatchStatser), log: &eventLog{}}
	go f.log.record(ch)
	for i := range procCount {
		f.procs = append(f.procs, startRegistrar(t, dsn, fmt.Sprintf("svc-%02d", i), 20000+i))
	}
	f.extra = startRegistrar(t, dsn, "extra", 20999)
	waitFor(t, "all 21 instances added", func() bool { return len(f.log.since(0, switchboard.EventAdded)) >= procCount+1 })
	// Steady state: every instance active and no removal for a whole
	// TTL, so that the deadlines are spread as the processes' tickers are.
	// (On a machine loaded far past its cores a process can miss its
	// renewals for seconds; that is noise before the scenario, not part
	// of it.)
	mark := f.log.len()
	quietSince := time.Now()
	waitFor(t, "a TTL of steady heartbeats", func() bool {
		s := f.stats.WatchStats()
		if n := f.log.len(); n != mark || s.Active != procCount+1 || s.Preserving {
			mark, quietSince = n, time.Now()
			return false
		}
		return time.Since(quietSince) > procTTL
	})
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out (30 s) waiting for %s", what)
		}
	}
}

func signalAll(t *testing.T, ps []*registrar, s syscall.Signal) {
	t.Helper()
	for _, p := range ps {
		p.signal(t, s)
	}
}

func removedIDs(ss []seen) map[string]int {
	out := map[string]int{}
	for _, s := range ss {
		out[s.ev.Instance.ID]++
	}
	return out
}

func TestSelfPreservationWithProcesses(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Run("freeze20", func(t *testing.T) { testFreezeAll(t, backend) })
			t.Run("kill2freeze18", func(t *testing.T) { testKillTwoFreezeRest(t, backend) })
			t.Run("kill3", func(t *testing.T) { testKillThree(t, backend) })
			t.Run("freezePastReap", func(t *testing.T) { testFreezePastReap(t, backend) })
		})
	}
}

// Frozen past their TTL (until the hub holds all 20 expirations), then
// resumed well before their rows are reaped at 2 × TTL: no removal, ever.
func testFreezeAll(t *testing.T, backend string) {
	f := startFleet(t, backend)
	from := f.log.len()
	freezeWritable(t, f.cat, f.procs)
	waitHeld(t, f, procCount)
	signalAll(t, f.procs, syscall.SIGCONT)
	waitFor(t, "the hold to be released", func() bool { return !f.stats.WatchStats().Preserving })
	time.Sleep(2 * procTTL)
	if rm := f.log.since(from, switchboard.EventRemoved); len(rm) > 0 {
		t.Fatalf("%d removed (first: %s %s), want none", len(rm), rm[0].ev.Reason, rm[0].ev.Instance.Name)
	}
	if s := f.stats.WatchStats(); s.SelfPreservationEvents != 1 || s.Preserving || s.Active != procCount+1 {
		t.Fatalf("stats after the freeze: %+v", s)
	}
}

// 2 killed and 18 frozen past their TTL (until the hub holds all 20
// expirations), then the 18 resume: no removal during the hold; after its
// release the 2 killed expire (one removed/expired each), the 18 never.
func testKillTwoFreezeRest(t *testing.T, backend string) {
	f := startFleet(t, backend)
	from := f.log.len()
	killed := f.procs[:2]
	signalAll(t, killed, syscall.SIGKILL)
	freezeWritable(t, f.cat, f.procs[2:])
	waitHeld(t, f, procCount)
	if rm := f.log.since(from, switchboard.EventRemoved); len(rm) > 0 {
		t.Fatalf("removed during the hold: %s %s", rm[0].ev.Reason, rm[0].ev.Instance.Name)
	}
	signalAll(t, f.procs[2:], syscall.SIGCONT)
	waitFor(t, "the 2 killed to expire", func() bool { return len(f.log.since(from, switchboard.EventRemoved)) >= 2 })
	time.Sleep(2 * procTTL)
	rm := f.log.since(from, switchboard.EventRemoved)
	got := removedIDs(rm)
	if len(rm) != 2 || got[killed[0].id] != 1 || got[killed[1].id] != 1 {
		t.Fatalf("removed %v, want exactly the 2 killed (%s, %s) once each", got, killed[0].id, killed[1].id)
	}
	for _, s := range rm {
		if s.ev.Reason != switchboard.ReasonExpired {
			t.Fatalf("removal reason %s, want expired", s.ev.Reason)
		}
	}
	if s := f.stats.WatchStats(); s.Preserving || s.SelfPreservationEvents != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// 3 of 20 killed, nobody frozen: 3 removed/expired, each within one TTL
// of its deadline (never before it); no hold.
func testKillThree(t *testing.T, backend string) {
	f := startFleet(t, backend)
	from := f.log.len()
	killed := f.procs[:3]
	signalAll(t, killed, syscall.SIGKILL)
	waitFor(t, "the 3 killed to expire", func() bool { return len(f.log.since(from, switchboard.EventRemoved)) >= 3 })
	time.Sleep(procTTL)
	rm := f.log.since(from, switchboard.EventRemoved)
	got := removedIDs(rm)
	if len(rm) != 3 || got[killed[0].id] != 1 || got[killed[1].id] != 1 || got[killed[2].id] != 1 {
		t.Fatalf("removed %v, want exactly the 3 killed once each", got)
	}
	for _, s := range rm {
		deadline := s.ev.Instance.LastSeen.Add(s.ev.Instance.TTL)
		lag := s.at.Sub(deadline)
		t.Logf("%s expired %v after its deadline", s.ev.Instance.Name, lag.Round(time.Millisecond))
		if s.ev.Reason != switchboard.ReasonExpired || lag < 0 || lag > s.ev.Instance.TTL {
			t.Fatalf("%s: %s %v after its deadline, want expired within its TTL", s.ev.Instance.Name, s.ev.Reason, lag)
		}
	}
	if s := f.stats.WatchStats(); s.SelfPreservationEvents != 0 {
		t.Fatalf("self-preservation engaged for 3 of 21: %+v", s)
	}
}

// Frozen longer than 2 × TTL: the extra process's reaper deletes the rows
// and the watcher sees them removed (a real mass failure is not hidden
// forever); resumed, they register again.
func testFreezePastReap(t *testing.T, backend string) {
	f := startFleet(t, backend)
	from := f.log.len()
	freezeWritable(t, f.cat, f.procs)
	waitFor(t, "self-preservation to engage", func() bool { return f.stats.WatchStats().Preserving })
	waitFor(t, "all 20 removed after their rows were reaped", func() bool {
		return len(f.log.since(from, switchboard.EventRemoved)) >= procCount
	})
	got := removedIDs(f.log.since(from, switchboard.EventRemoved))
	for _, p := range f.procs {
		if got[p.id] != 1 {
			t.Fatalf("removals %v: want each of the 20 once", got)
		}
	}
	if got[f.extra.id] != 0 {
		t.Fatal("the extra, never frozen, was removed")
	}
	readded := f.log.len()
	signalAll(t, f.procs, syscall.SIGCONT)
	waitFor(t, "the 20 to register again", func() bool { return len(f.log.since(readded, switchboard.EventAdded)) >= procCount })
}

// waitHeld waits until self-preservation holds n expirations: every frozen
// instance is past its TTL, the last of them only just, so each row is most
// of a TTL from being reaped (at 2 × TTL). The scenarios resume the
// processes right then, so that on a loaded machine a resumed process has
// as long as it can have to renew before the extra's reaper deletes its
// row; a fixed freeze measured from the SIGSTOP left it half a heartbeat.
func waitHeld(t *testing.T, f *fleet, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("self-preservation to hold %d expirations", n), func() bool {
		s := f.stats.WatchStats()
		return s.Preserving && s.HeldExpirations >= n
	})
}

// freezeWritable stops procs (never the extra) such that the catalog can
// still be written. A SQLite file has one write lock: a
// process stopped inside its heartbeat's transaction holds it for as long
// as it is stopped, and then nobody, the extra's reaper included, can
// write (that case is sqlite's TestWriteLockHolderStopped, not this
// test's). So after each freeze a write from the test's own handle must go
// through; if it does not, the fleet is resumed and frozen again.
func freezeWritable(t *testing.T, cat switchboard.Catalog, procs []*registrar) {
	t.Helper()
	for range 10 {
		signalAll(t, procs, syscall.SIGSTOP)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := cat.Heartbeat(ctx, "write-probe")
		cancel()
		if err == nil {
			return
		}
		t.Logf("a stopped process holds the write lock (%v): resuming and stopping the fleet again", err)
		signalAll(t, procs, syscall.SIGCONT)
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("every freeze left a process holding the catalog's write lock")
}
