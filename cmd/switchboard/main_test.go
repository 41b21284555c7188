package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// binary is the CLI built once for the tests that need other OS processes.
var binary string

func TestMain(m *testing.M) {
	if n := os.Getenv(fanoutEnv); n != "" {
		os.Exit(fanoutChild(n, os.Getenv(fanoutDSNEnv)))
	}
	dir, err := os.MkdirTemp("", "switchboard-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "switchboard")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the CLI:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs one command line in this process and returns its exit code and
// output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return cliWith(t, nil, args...)
}

// cliWith is cli with the command line's globals handed to setup (when not
// nil) before it runs.
func cliWith(t *testing.T, setup func(g *globals), args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = runWith(ctx, setup, args, &out, &errb)
	return code, out.String(), errb.String()
}

// runWith is run with setup (when not nil) handed the run's globals
// before the command line executes: how a test sets their hooks.
func runWith(ctx context.Context, setup func(g *globals), args []string, stdout, stderr io.Writer) int {
	root, g := newRootGlobals(stdout, stderr)
	if setup != nil {
		setup(g)
	}
	return execute(ctx, root, g, args)
}

func dsnIn(t *testing.T) (dsn, path string) {
	path = filepath.Join(t.TempDir(), "sub", "catalog.db")
	return "sqlite://" + path, path
}

// openCatalog opens dsn in this process, closed at cleanup.
func openCatalog(t testing.TB, dsn string) switchboard.Catalog {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// backends runs fn once per catalog backend, each on a fresh catalog: a
// SQLite file, a throwaway PostgreSQL database of this machine's server,
// and a server (http://) in front of a SQLite file.
func backends(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) {
		dsn, _ := dsnIn(t)
		fn(t, dsn)
	})
	t.Run("postgres", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dsn, drop, err := pgtest.NewDatabase(ctx)
		if err != nil {
			t.Fatalf("PostgreSQL (start it with .ci/run or pg_ctlcluster): %v", err)
		}
		t.Cleanup(drop)
		fn(t, dsn)
	})
	t.Run("http", func(t *testing.T) {
		dsn, _ := dsnIn(t)
		fn(t, serveHTTP(t, dsn))
	})
}

func TestInvalidInputExitsTwoAndWritesNothing(t *testing.T) {
	dsn, path := dsnIn(t)
	base := []string{"register", "--dsn", dsn, "--name", "svc", "--type", "writer", "--address", "127.0.0.1:4317"}
	for _, tc := range []struct {
		name  string
		args  []string
		field string
	}{
		{"empty name", []string{"register", "--dsn", dsn, "--name", "", "--type", "w", "--address", "127.0.0.1:1"}, "name"},
		{"name of symbols", []string{"register", "--dsn", dsn, "--name", "__", "--type", "w", "--address", "127.0.0.1:1"}, "name"},
		{"bad address", append(base[:0:0], "register", "--dsn", dsn, "--name", "s", "--type", "w", "--address", "localhost"), "address"},
		{"unbracketed ipv6", append(base[:0:0], "register", "--dsn", dsn, "--name", "s", "--type", "w", "--address", "::1:80"), "address"},
		{"bad capability", append(append([]string{}, base...), "--capability", "has space"), "capability"},
		{"bad ttl", append(append([]string{}, base...), "--ttl", "ten"), "ttl"},
		{"negative heartbeat", append(append([]string{}, base...), "--heartbeat", "-1s"), "heartbeat"},
		{"heartbeat longer than ttl", append(append([]string{}, base...), "--heartbeat", "20s", "--ttl", "10s"), "heartbeat"},
		{"bad meta", append(append([]string{}, base...), "--meta", "novalue"), "meta"},
		{"bad dsn", []string{"ls", "--dsn", "mysql://x"}, "dsn"},
		{"empty sqlite path", []string{"ls", "--dsn", "sqlite://"}, "dsn"},
		{"memory dsn in a standalone command", []string{"ls", "--dsn", "sqlite::memory:"}, "dsn"},
		{"bad reap duration", []string{"reap", "--dsn", dsn, "--older-than", "soon"}, "older-than"},
		{"unknown flag", []string{"ls", "--dsn", dsn, "--nope"}, "--nope"},
		{"bad filter capability", []string{"ls", "--dsn", dsn, "--capability", "a b"}, "capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := cli(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if stdout != "" {
				t.Fatalf("stdout %q", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.field) {
				t.Fatalf("stderr should be one line naming %q, got %q", tc.field, stderr)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("invalid input created the catalog file: %v", err)
			}
		})
	}
}

func TestDeregisterUnknown(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		openCatalog(t, dsn) // deregister works only on an existing catalog
		code, _, stderr := cli(t, "deregister", "--dsn", dsn, "no-such-id")
		if code != 1 || !strings.Contains(stderr, `no instance with id "no-such-id"`) {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
	})
}

func TestLsAndReapEmpty(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		openCatalog(t, dsn) // ls and reap read only an existing catalog
		code, stdout, stderr := cli(t, "ls", "--dsn", dsn, "--json")
		if code != 0 || stdout != "[]\n" {
			t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
		code, stdout, stderr = cli(t, "reap", "--dsn", dsn)
		if code != 0 || !strings.HasPrefix(stdout, "reaped 0 rows") {
			t.Fatalf("reap: exit %d stdout %q stderr %q", code, stdout, stderr)
		}
	})
}

func TestVersion(t *testing.T) {
	code, stdout, _ := cli(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "switchboard ") {
		t.Fatalf("exit %d stdout %q", code, stdout)
	}
}

// proc is a CLI subprocess whose stdout lines the test reads.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *testkit.SyncBuffer
	done   chan error
}

func start(t testing.TB, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024), stderr: &testkit.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range p.lines {
		}
	})
	return p
}

func (p *proc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("process exited; stderr: %s", p.stderr)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("no output within 30s; stderr: %s", p.stderr)
	}
	return ""
}

func (p *proc) wait(t *testing.T) error {
	t.Helper()
	for range p.lines {
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("process did not exit")
	}
	return nil
}

func TestRegisterPrintsJSONAndDeregistersOnSignal(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		p := start(t, "register", "--dsn", dsn, "--name", "Edge_Writer", "--type", "writer", "--address", "[::1]:4317",
			"--capability", "storage", "--capability", "custom.cap:v2", "--version", "1.4.0", "--meta", "zone=eu-1",
			"--id", "w-1", "--heartbeat", "100ms", "--ttl", "2s")
		line := p.line(t)
		var raw map[string]any
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			t.Fatalf("not one JSON line: %q", line)
		}
		for _, k := range []string{"id", "name", "type", "address", "capabilities", "version", "metadata", "ttl", "registered_at", "last_seen", "stale"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("field %q missing from %s", k, line)
			}
		}
		if raw["id"] != "w-1" || raw["name"] != "edge-writer" || raw["ttl"] != "2s" || raw["stale"] != false {
			t.Fatalf("instance line: %s", line)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", raw["last_seen"].(string)); err != nil {
			t.Fatalf("last_seen not RFC 3339 with ms: %v", err)
		}

		code, stdout, _ := cli(t, "ls", "--dsn", dsn, "--json", "--capability", "custom.cap:v2")
		var list []switchboard.Instance
		if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 1 || list[0].ID != "w-1" {
			t.Fatalf("ls --json: exit %d %q", code, stdout)
		}
		code, stdout, _ = cli(t, "ls", "--dsn", dsn)
		if code != 0 || !strings.Contains(stdout, "edge-writer") || !strings.Contains(stdout, "custom.cap:v2") {
			t.Fatalf("ls table: %q", stdout)
		}

		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.wait(t); err != nil {
			t.Fatalf("register exit: %v; stderr %s", err, p.stderr)
		}
		code, stdout, _ = cli(t, "ls", "--dsn", dsn, "--json", "--all")
		if code != 0 || stdout != "[]\n" {
			t.Fatalf("row left after SIGTERM: %q", stdout)
		}
	})
}

// TestTwoProcessesSeeEachOther runs watchers and registrations in two OS
// processes on one file, both ways, plus a kill -9.
func TestTwoProcessesSeeEachOther(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		cat := openCatalog(t, dsn)
		events, err := cat.Watch(ctx, switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		watcher := start(t, "watch", "--dsn", dsn, "--json")

		// This process registers; the other one sees it.
		mine, err := cat.Register(ctx, switchboard.Instance{Name: "here", Type: "router", Address: "127.0.0.1:7000", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		waitLine(t, watcher, "added", mine.ID)

		// The other process registers, then dies by SIGKILL: this process sees
		// it arrive, then expire; the other watcher too.
		reg := start(t, "register", "--dsn", dsn, "--name", "there", "--type", "querier", "--address", "127.0.0.1:7001",
			"--heartbeat", "100ms", "--ttl", "500ms")
		var theirs switchboard.Instance
		if err := json.Unmarshal([]byte(reg.line(t)), &theirs); err != nil {
			t.Fatal(err)
		}
		// Each removal waits until both watchers have seen the instance
		// arrive: a watcher that first reads the log after the removal
		// sees no change at all (an instance that came and went, or one
		// already expired, is no event for it), so the other process,
		// slower to read under load, would print nothing.
		waitEvent(t, events, switchboard.EventAdded, "", theirs.ID)
		waitLine(t, watcher, `"added"`, theirs.ID)
		reg.cmd.Process.Kill()
		waitEvent(t, events, switchboard.EventRemoved, switchboard.ReasonExpired, theirs.ID)
		waitLine(t, watcher, `"removed","reason":"expired"`, theirs.ID)

		// A graceful stop is a deregistration, seen at once by both.
		reg2 := start(t, "register", "--dsn", dsn, "--name", "polite", "--type", "querier", "--address", "127.0.0.1:7002")
		var polite switchboard.Instance
		json.Unmarshal([]byte(reg2.line(t)), &polite)
		waitEvent(t, events, switchboard.EventAdded, "", polite.ID)
		waitLine(t, watcher, `"added"`, polite.ID)
		reg2.cmd.Process.Signal(syscall.SIGINT)
		waitEvent(t, events, switchboard.EventRemoved, switchboard.ReasonDeregistered, polite.ID)
		waitLine(t, watcher, `"removed","reason":"deregistered"`, polite.ID)
		if err := reg2.wait(t); err != nil {
			t.Fatalf("graceful register exit: %v", err)
		}
	})
}

func waitLine(t *testing.T, p *proc, substr, id string) {
	t.Helper()
	for {
		l := p.line(t)
		if strings.Contains(l, substr) && strings.Contains(l, id) {
			return
		}
	}
}

func waitEvent(t *testing.T, ch <-chan switchboard.Event, kind switchboard.EventKind, reason switchboard.Reason, id string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == kind && ev.Reason == reason && ev.Instance.ID == id {
				return
			}
		case <-timeout:
			t.Fatalf("no %s/%s for %s within 30s", kind, reason, id)
		}
	}
}

// TestContention: 8 bootstraps in this process and 4 register processes on
// one file for at least 10 s, and until every bootstrap has heartbeat 50
// times (a loaded machine heartbeats less often than every 50ms). No error
// may reach a caller and no heartbeat may be lost: zero failures, zero
// re-registrations, nobody expires, nothing logged by the processes, during
// the run or at their orderly shutdown (SIGTERM).
func TestContention(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s contention run; skipped with -short")
	}
	dsn, _ := dsnIn(t)
	ctx := context.Background()
	cat := openCatalog(t, dsn)
	events, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	var removed []switchboard.Event
	var mu sync.Mutex
	go func() {
		for ev := range events {
			if ev.Kind == switchboard.EventRemoved || ev.Kind == switchboard.EventError {
				mu.Lock()
				removed = append(removed, ev)
				mu.Unlock()
			}
		}
	}()
	// The TTL is 100 heartbeat intervals: what is tested is that writes
	// under contention do not fail, and a loaded machine (load average
	// 10–25 on two cores) stalls a SQLite writer for more than a second at
	// times, which a 1 s TTL turned into a false expiry.
	const ttl = 5 * time.Second
	var procs []*proc
	for i := 0; i < 4; i++ {
		p := start(t, "register", "--dsn", dsn, "--name", fmt.Sprintf("proc-%d", i), "--type", "writer",
			"--address", fmt.Sprintf("127.0.0.1:%d", 8000+i), "--heartbeat", "50ms", "--ttl", ttl.String(), "--log-level", "warn")
		p.line(t)
		procs = append(procs, p)
	}
	var regs []*switchboard.Registration
	for i := 0; i < 8; i++ {
		in := switchboard.Instance{Name: fmt.Sprintf("local-%d", i), Type: "querier", Address: fmt.Sprintf("127.0.0.1:%d", 9000+i), TTL: ttl}
		r, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	// Meanwhile this process also writes: registrations come and go.
	began := time.Now()
	deadline := began.Add(3 * time.Minute) // against a hang only
	done := func() bool {
		if time.Since(began) < 10*time.Second {
			return false
		}
		for _, r := range regs {
			if r.Stats().Heartbeats < 50 {
				return false
			}
		}
		return true
	}
	churn := 0
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("bootstraps did not heartbeat 50 times each within 3 minutes")
		}
		in, err := cat.Register(ctx, switchboard.Instance{Name: "churn", Type: "router", Address: "127.0.0.1:1", TTL: time.Minute})
		if err != nil {
			t.Fatalf("register under contention: %v", err)
		}
		if err := cat.Deregister(ctx, in.ID); err != nil {
			t.Fatalf("deregister under contention: %v", err)
		}
		churn++
		time.Sleep(5 * time.Millisecond)
	}
	for _, r := range regs {
		s := r.Stats()
		if s.Failures != 0 || s.Reregistrations != 0 || s.Heartbeats < 50 {
			t.Errorf("bootstrap %s: %+v", r.ID(), s)
		}
		r.Close()
	}
	for i, p := range procs {
		if s := p.stderr.String(); s != "" {
			t.Errorf("process %d reported problems during the run:\n%s", i, s)
		}
		before := len(p.stderr.String())
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.wait(t); err != nil {
			t.Errorf("process %d exit: %v", i, err)
		}
		// An orderly shutdown cancels a heartbeat in flight: that is not
		// a failure to log.
		if s := p.stderr.String()[before:]; s != "" {
			t.Errorf("process %d reported problems at SIGTERM:\n%s", i, s)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range removed {
		if ev.Kind == switchboard.EventError || ev.Reason == switchboard.ReasonExpired {
			t.Errorf("during the run: %s %s %s %v", ev.Kind, ev.Reason, ev.Instance.Name, ev.Err)
		}
	}
	t.Logf("%d register/deregister pairs from this process alongside 12 heartbeating registrations", churn)
}

func TestLeasesCommand(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		cat := openCatalog(t, dsn)
		leaser := cat.(switchboard.Leaser)
		first, err := leaser.Acquire(ctx, "compactor-lock", "pod-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := leaser.Release(ctx, first); err != nil {
			t.Fatal(err)
		}
		second, err := leaser.Acquire(ctx, "compactor-lock", "pod-b-with-a-very-long-identity-that-is-never-truncated", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := cli(t, "leases", "--dsn", dsn, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got []leaseJSON
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("%v: %q", err, stdout)
		}
		if len(got) != 1 || got[0].Holder != second.Holder || got[0].Token != second.Token || !got[0].Held || got[0].TTL != "1m0s" {
			t.Fatalf("leases --json = %+v, want holder %s token %d", got, second.Holder, second.Token)
		}
		if second.Token <= first.Token {
			t.Fatalf("fencing token did not grow: %d then %d", first.Token, second.Token)
		}
		code, stdout, _ = cli(t, "leases", "--dsn", dsn)
		if code != 0 || !strings.Contains(stdout, second.Holder) || !strings.Contains(stdout, "in ") {
			t.Fatalf("leases table: %q", stdout)
		}
	})
}

func TestEchoAndSend(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		echo := start(t, "echo", "--dsn", dsn, "--name", "Echo_Module", "--listen", "127.0.0.1:0")
		var in switchboard.Instance
		if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
			t.Fatal(err)
		}
		if in.Name != "echo-module" || !strings.HasPrefix(in.Address, "127.0.0.1:") || strings.HasSuffix(in.Address, ":0") {
			t.Fatalf("echo registered %+v", in)
		}
		code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", "flow1.echo-module.node-a:in", "--data", "hello, module")
		if code != 0 || stdout != "hello, module\n" {
			t.Fatalf("send: exit %d stdout %q stderr %q", code, stdout, stderr)
		}
		code, _, stderr = cli(t, "send", "--dsn", dsn, "--to", "flow1.nobody.node-a:in", "--data", "x")
		if code != 1 || !strings.Contains(stderr, "code module_unknown") {
			t.Fatalf("unknown module: exit %d stderr %q", code, stderr)
		}
		for _, bad := range [][]string{
			{"--to", "not-a-node-name", "--data", "x"},
			{"--to", "f.echo-module.n", "--data", "x"},
			{"--to", "f.echo-module.n:in", "--data", "x", "--edge-retry", "11"},
		} {
			code, _, stderr = cli(t, append([]string{"send", "--dsn", dsn}, bad...)...)
			if code != 2 || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("%v: exit %d stderr %q", bad, code, stderr)
			}
		}
		echo.cmd.Process.Signal(syscall.SIGTERM)
		if err := echo.wait(t); err != nil {
			t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
		}
		code, stdout, _ = cli(t, "ls", "--dsn", dsn, "--json", "--all")
		if code != 0 || stdout != "[]\n" {
			t.Fatalf("echo left its row behind: %q", stdout)
		}
	})
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	dsn, _ := dsnIn(t)
	t.Setenv("SWITCHBOARD_DISCOVERY_DSN", "mysql://not-a-backend")
	if code, _, stderr := cli(t, "ls"); code != 2 || !strings.Contains(stderr, "SWITCHBOARD_DISCOVERY_DSN \"mysql:") {
		t.Fatalf("bad DSN from the environment: exit %d stderr %q", code, stderr)
	}
	openCatalog(t, dsn)
	if code, stdout, stderr := cli(t, "ls", "--dsn", dsn, "--json"); code != 0 || stdout != "[]\n" {
		t.Fatalf("--dsn should win over the environment: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
}

func TestDemo(t *testing.T) {
	for _, dsn := range []string{"sqlite::memory:", func() string { d, _ := dsnIn(t); return d }()} {
		// A TTL of 20 heartbeats: on a loaded machine a process can stall for
		// a few hundred milliseconds without a live instance expiring (only
		// the crashed writer must).
		code, stdout, stderr := cli(t, "demo", "--dsn", dsn, "--ttl", "2s", "--heartbeat", "100ms")
		if code != 0 {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", dsn, code, stdout, stderr)
		}
		for _, want := range []string{`removed/expired +demo-writer`, `updated/draining +demo-compactor`, `removed/deregistered +demo-compactor`,
			`router +-> query_execution += demo-querier`, "demo done"} {
			if !regexp.MustCompile(want).MatchString(stdout) {
				t.Errorf("%s: output lacks %q:\n%s", dsn, want, stdout)
			}
		}
		hint := "in another terminal"
		if dsn == "sqlite::memory:" {
			hint = "lives in this process only"
		} else if !strings.Contains(stdout, " watch --dsn "+dsn) {
			t.Errorf("the hint does not name the DSN to watch:\n%s", stdout)
		}
		if !strings.Contains(stdout, hint) {
			t.Errorf("%s: no hint %q:\n%s", dsn, hint, stdout)
		}
	}
}

// The demo's hint quotes a DSN the shell would mangle, and never shows a
// password.
func TestDemoHintQuotesDSN(t *testing.T) {
	dsn := withPassword(t)
	code, stdout, stderr := cli(t, "demo", "--dsn", dsn, "--ttl", "2s", "--heartbeat", "100ms") // as TestDemo
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	want := " watch --dsn " + shellQuote(switchboard.RedactDSN(dsn)) + "`"
	if !strings.Contains(stdout, want) || !strings.Contains(want, "'") {
		t.Fatalf("hint lacks %s:\n%s", want, stdout)
	}
	if strings.Contains(stdout+stderr, "s3cr3t") {
		t.Fatalf("password shown:\n%s", stdout)
	}
}

// reap without --older-than uses each row's own TTL: a row with a long TTL
// that is still active survives, whatever the configured default TTL.
func TestReapDefaultKeepsActiveRowsWithLongTTL(t *testing.T) {
	dsn, _ := dsnIn(t)
	ctx := context.Background()
	cat := openCatalog(t, dsn)
	long, _ := cat.Register(ctx, switchboard.Instance{Name: "patient", Type: "w", Address: "127.0.0.1:1", TTL: time.Hour})
	short, _ := cat.Register(ctx, switchboard.Instance{Name: "gone", Type: "w", Address: "127.0.0.1:2", TTL: 100 * time.Millisecond})
	time.Sleep(300 * time.Millisecond)
	t.Setenv("SWITCHBOARD_DISCOVERY_TTL", "100ms")
	t.Setenv("SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL", "50ms")
	code, stdout, stderr := cli(t, "reap", "--dsn", dsn)
	if code != 0 || !strings.HasPrefix(stdout, "reaped 1 rows") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	if _, err := cat.Get(ctx, long.ID); err != nil {
		t.Fatalf("active row with a long TTL was reaped: %v", err)
	}
	if _, err := cat.Get(ctx, short.ID); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("stale row survived: %v", err)
	}
}

func TestRegisterFlagsValidateAsFinalValues(t *testing.T) {
	dsn, _ := dsnIn(t)
	// With the default 3 s heartbeat, a 2 s ttl from the environment would
	// not validate; the flags replace both.
	t.Setenv("SWITCHBOARD_DISCOVERY_TTL", "2s")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testkit.SyncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"register", "--dsn", dsn, "--name", "a", "--type", "w", "--address", "127.0.0.1:1",
			"--ttl", "5s", "--heartbeat", "1s"}, &out, &errb)
	}()
	waitFor := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), `"ttl":"5s"`) {
		if time.Now().After(waitFor) {
			t.Fatalf("no registration line; stderr %q", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
