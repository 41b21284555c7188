package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// Every usage error exits 2 with one line that ends with the failing
// command's --help.
func TestUsageErrors(t *testing.T) {
	dsn, path := dsnIn(t)
	for _, tc := range []struct {
		args []string
		want string // in the message
		help string // the command named in the hint
	}{
		{[]string{"deregister", "--dsn", dsn}, "deregister: missing argument ID", "switchboard deregister"},
		{[]string{"deregister", "--dsn", dsn, "a", "b"}, `unexpected "b"`, "switchboard deregister"},
		{[]string{"ls", "--dsn", dsn, "foo"}, `ls takes no arguments, got "foo"`, "switchboard ls"},
		{[]string{"watch", "--dsn", dsn, "foo"}, `watch takes no arguments`, "switchboard watch"},
		{[]string{"foo"}, `unknown command "foo"`, "switchboard"},
		{[]string{"lss"}, `unknown command "lss" (did you mean "ls"?)`, "switchboard"},
		{[]string{"register", "--dsn", dsn}, "--name, --type and --address are required", "switchboard register"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w"}, "--address is required", "switchboard register"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "nowhere"}, `--address "nowhere"`, "switchboard register"},
		{[]string{"echo", "--dsn", dsn}, "--name is required", "switchboard echo"},
		{[]string{"send", "--dsn", dsn, "--data", "x"}, "--to is required", "switchboard send"},
		{[]string{"help", "foo"}, `unknown help topic "foo"`, "switchboard help"},
		{[]string{"help", "ls", "foo"}, `unknown help topic "ls foo"`, "switchboard help"},
		{[]string{"ls", "--dsn", dsn, "-o", "yaml"}, `--output "yaml": want table, wide or json`, "switchboard ls"},
		{[]string{"leases", "--dsn", dsn, "--json", "-o", "wide"}, "contradict", "switchboard leases"},
		{[]string{"ls", "--log-level", "loud"}, `--log-level "loud"`, "switchboard ls"},
		{[]string{"reap", "--dsn", dsn, "--older-than", "soon"}, `--older-than "soon"`, "switchboard reap"},
		{[]string{"ls", "--dsn", dsn, "--name", "__"}, `--name "__"`, "switchboard ls"},
		{[]string{"version", "extra"}, "version takes no arguments", "switchboard version"},
		{[]string{"demo", "--ttl", "1s", "--heartbeat", "600ms"}, `--heartbeat "600ms": must be at most half the ttl (1s)`, "switchboard demo"},
		// A ttl too short for any heartbeat is a --ttl error, not one about
		// the heartbeat derived from it.
		{[]string{"demo", "--dsn", dsn, "--ttl", "1ns"}, `--ttl "1ns": must be at least 20ms`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "2ns", "--heartbeat", "1ns"}, `--ttl "2ns": must be at least 20ms`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "100us"}, `--ttl "100µs": must be at least 20ms`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "19ms"}, `--ttl "19ms": must be at least 20ms`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "0s"}, `--ttl "0s": must be positive`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "-1s", "--heartbeat", "1s"}, `--ttl "-1s": must be positive`, "switchboard demo"},
		// Heartbeats under 10ms would renew in a busy loop.
		{[]string{"demo", "--dsn", dsn, "--heartbeat", "1ns"}, `--heartbeat "1ns": must be at least 10ms`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "1s", "--heartbeat", "9ms"}, `--heartbeat "9ms": must be at least 10ms`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--ttl", "2h"}, `--ttl "2h0m0s": must be at most max_ttl (1h0m0s)`, "switchboard demo"},
		{[]string{"demo", "--dsn", dsn, "--heartbeat", "0s"}, `--heartbeat "0s": must be positive`, "switchboard demo"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "127.0.0.1:1", "--ttl", "1ns"}, `--ttl "1ns": must be at least 20ms`, "switchboard register"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "127.0.0.1:1", "--ttl", "500us", "--heartbeat", "1s"}, `--ttl "500µs": must be at least 20ms`, "switchboard register"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "127.0.0.1:1", "--ttl", "15ms"}, `--ttl "15ms": must be at least 20ms`, "switchboard register"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "127.0.0.1:1", "--heartbeat", "1ns"}, `--heartbeat "1ns": must be at least 10ms`, "switchboard register"},
		{[]string{"register", "--dsn", dsn, "--name", "x", "--type", "w", "--address", "127.0.0.1:1", "--ttl", "1s", "--heartbeat", "9999us"}, `--heartbeat "9.999ms": must be at least 10ms`, "switchboard register"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := cli(t, tc.args...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and nothing on stdout", code, stdout, stderr)
			}
			want := "; run '" + tc.help + " --help'\n"
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "switchboard: ") ||
				!strings.Contains(stderr, tc.want) || !strings.HasSuffix(stderr, want) {
				t.Fatalf("stderr %q: want one line with %q ending %q", stderr, tc.want, want)
			}
		})
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a usage error created the catalog file: %v", err)
	}
}

func TestHelpAndNoArguments(t *testing.T) {
	code, stdout, stderr := cli(t)
	if code != 0 || !strings.Contains(stdout, "Available Commands:") || stderr != "" {
		t.Fatalf("no arguments: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, viaHelp, _ := cli(t, "help", "ls")
	_, viaFlag, _ := cli(t, "ls", "--help")
	if code != 0 || viaHelp != viaFlag || !strings.Contains(viaHelp, "sorted by name") {
		t.Fatalf("help ls: exit %d\n%s\nls --help:\n%s", code, viaHelp, viaFlag)
	}
}

// Every command's --help has a description, examples, the environment
// variables that apply and the exit codes.
func TestEveryCommandHasFullHelp(t *testing.T) {
	root := newRoot(nil, nil)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if c.Parent() == nil || c.Parent().Name() != "completion" { // cobra's own per-shell scripts
			t.Run(c.CommandPath(), func(t *testing.T) {
				code, stdout, stderr := cli(t, append(strings.Fields(c.CommandPath())[1:], "--help")...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d stderr %q", code, stderr)
				}
				if c.Long == "" {
					t.Error("no description (Long)")
				}
				for _, section := range []string{"Usage:", "Examples:", "Environment:", "Exit codes:"} {
					if !strings.Contains(stdout, "\n"+section+"\n") {
						t.Errorf("no %q section:\n%s", section, stdout)
					}
				}
				if !strings.Contains(stdout, "  2  invalid input") {
					t.Errorf("exit code 2 not explained:\n%s", stdout)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	_, stdout, _ := cli(t, "register", "--help")
	for _, want := range []string{envTTL, envHeartbeat, envDSN, "130/143", "min(3s, ttl/3)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("register --help lacks %q", want)
		}
	}
	_, stdout, _ = cli(t, "completion", "--help")
	if !strings.Contains(stdout, "bash") || !strings.Contains(stdout, "zsh") {
		t.Errorf("completion --help does not name the shells:\n%s", stdout)
	}
}

// seed registers instances for the output tests: two with the same name
// (ordered by id), one with many capabilities, one with empty fields.
func seed(t *testing.T, dsn string) (many []string) {
	t.Helper()
	cat := openCatalog(t, dsn)
	ctx := context.Background()
	for i := range 12 {
		many = append(many, fmt.Sprintf("capability-number-%02d", i))
	}
	for _, in := range []switchboard.Instance{
		{ID: "z-2", Name: "zeta", Type: "writer", Address: "127.0.0.1:2", Capabilities: many, Version: "1.0",
			Metadata: map[string]string{"zone": "eu-1", "rack": "r7"}},
		{ID: "b-1", Name: "alpha", Type: "router", Address: "127.0.0.1:1"},
		{ID: "a-1", Name: "alpha", Type: "router", Address: "127.0.0.1:3", Capabilities: []string{"storage"}, Version: "2.0"},
	} {
		in.TTL = time.Minute
		if _, err := cat.Register(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	return many
}

// rows splits a table into its lines' fields.
func rows(out string) [][]string {
	var r [][]string
	for l := range strings.Lines(out) {
		r = append(r, strings.Fields(l))
	}
	return r
}

func TestLsOutputFormats(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		openCatalog(t, dsn) // ls reads only an existing catalog
		code, _, stderr := cli(t, "ls", "--dsn", dsn)
		if code != 0 || stderr != "no instances found\n" {
			t.Fatalf("empty ls: exit %d stderr %q", code, stderr)
		}
		many := seed(t, dsn)

		code, table, stderr := cli(t, "ls", "--dsn", dsn)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		r := rows(table)
		if len(r) != 4 || !slices.Equal(r[0][:5], []string{"NAME", "ID", "TYPE", "ADDRESS", "CAPABILITIES"}) {
			t.Fatalf("table:\n%s", table)
		}
		var order []string
		for _, f := range r[1:] {
			order = append(order, f[0]+"/"+f[1])
		}
		if !slices.Equal(order, []string{"alpha/a-1", "alpha/b-1", "zeta/z-2"}) {
			t.Fatalf("order %v, want by name then id:\n%s", order, table)
		}
		if r[2][4] != "-" || r[2][5] != "-" {
			t.Errorf("empty capabilities and version should be '-': %v", r[2])
		}
		for l := range strings.Lines(table) {
			if len(l) > 200 {
				t.Errorf("table line of %d columns: %q", len(l), l)
			}
		}
		if !strings.Contains(table, ",+") || !strings.Contains(table, " more") || strings.Contains(table, many[len(many)-1]) {
			t.Errorf("capabilities not truncated in table:\n%s", table)
		}

		code, wide, _ := cli(t, "ls", "--dsn", dsn, "-o", "wide")
		if code != 0 || !strings.Contains(wide, strings.Join(many, ",")) || !strings.Contains(wide, "rack=r7,zone=eu-1") {
			t.Fatalf("wide:\n%s", wide)
		}
		if h := rows(wide)[0]; !slices.Contains(h, "TTL") || !slices.Contains(h, "REGISTERED") || !slices.Contains(h, "METADATA") {
			t.Fatalf("wide header %v", h)
		}
		if !regexp.MustCompile(`\d\d:\d\d:\d\d \S+`).MatchString(wide) {
			t.Errorf("wide REGISTERED is not a time with its zone:\n%s", wide)
		}

		_, asJSON, _ := cli(t, "ls", "--dsn", dsn, "-o", "json")
		_, alias, _ := cli(t, "ls", "--dsn", dsn, "--json")
		var list []switchboard.Instance
		if err := json.Unmarshal([]byte(asJSON), &list); err != nil || len(list) != 3 {
			t.Fatalf("-o json: %v %q", err, asJSON)
		}
		if list[0].ID != "a-1" || list[1].ID != "b-1" || list[2].ID != "z-2" {
			t.Fatalf("json order %s %s %s", list[0].ID, list[1].ID, list[2].ID)
		}
		var again []switchboard.Instance
		json.Unmarshal([]byte(alias), &again)
		if len(again) != 3 || again[2].ID != "z-2" {
			t.Fatalf("--json differs from -o json: %q", alias)
		}
	})
}

func TestLeasesOutputFormats(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		openCatalog(t, dsn) // leases reads only an existing catalog
		code, _, stderr := cli(t, "leases", "--dsn", dsn)
		if code != 0 || stderr != "no leases found\n" {
			t.Fatalf("empty: exit %d stderr %q", code, stderr)
		}
		leaser := openCatalog(t, dsn).(switchboard.Leaser)
		ctx := context.Background()
		for _, n := range []string{"zz-lock", "aa-lock"} {
			if _, err := leaser.Acquire(ctx, n, "pod-"+n, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		_, table, _ := cli(t, "leases", "--dsn", dsn)
		r := rows(table)
		if len(r) != 3 || r[1][0] != "aa-lock" || r[2][0] != "zz-lock" {
			t.Fatalf("table:\n%s", table)
		}
		_, wide, _ := cli(t, "leases", "--dsn", dsn, "-o", "wide")
		if h := rows(wide)[0]; !slices.Contains(h, "HELD") || !strings.Contains(wide, "true") {
			t.Fatalf("wide:\n%s", wide)
		}
		_, a, _ := cli(t, "leases", "--dsn", dsn, "-o", "json")
		_, b, _ := cli(t, "leases", "--dsn", dsn, "--json")
		var la, lb []leaseJSON
		if json.Unmarshal([]byte(a), &la) != nil || json.Unmarshal([]byte(b), &lb) != nil || len(la) != 2 || len(lb) != 2 ||
			la[0].Name != "aa-lock" || lb[0].Name != "aa-lock" {
			t.Fatalf("-o json %q, --json %q", a, b)
		}
	})
}

// watchIn runs `watch` in this process until the returned stop is called.
func watchIn(t *testing.T, terminal bool, args ...string) (out, errb *testkit.SyncBuffer, stop func() int) {
	t.Helper()
	out, errb = &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	setup := func(g *globals) { g.terminal = func(w io.Writer) bool { return terminal && w == io.Writer(errb) } }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runWith(ctx, setup, append([]string{"watch"}, args...), out, errb) }()
	return out, errb, func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("watch did not stop")
		}
		return -1
	}
}

func waitForCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitUntil(t, what, cond)
}

func TestWatchOutput(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		cat := openCatalog(t, dsn)
		ctx := context.Background()
		long := strings.Repeat("very-long-name-", 3) + "end" // 48: the longest name

		// table: a header, aligned columns, long names cut, "-" for empty.
		out, errb, stop := watchIn(t, true, "--dsn", dsn, "--capability", "storage")
		waitForCond(t, "terminal hint", func() bool { return strings.Contains(errb.String(), "Ctrl-C to stop") })
		hint := errb.String()
		if strings.Count(hint, "\n") != 1 || !strings.Contains(hint, "watching instances with capability storage in ") {
			t.Fatalf("hint %q", hint)
		}
		if _, err := cat.Register(ctx, switchboard.Instance{ID: "w-1", Name: long, Type: "writer", Address: "127.0.0.1:1",
			Capabilities: []string{"storage"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := cat.Register(ctx, switchboard.Instance{ID: "w-2", Name: "short", Type: "writer", Address: "127.0.0.1:2",
			Capabilities: []string{"storage"}}); err != nil {
			t.Fatal(err)
		}
		waitForCond(t, "two events", func() bool { return strings.Count(out.String(), "\n") >= 3 })
		if code := stop(); code != 0 {
			t.Fatalf("exit %d: %s", code, errb)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		header := lines[0]
		if !strings.HasPrefix(header, "TIME") || !strings.Contains(header, "CAPABILITIES") {
			t.Fatalf("header %q", header)
		}
		idCol := strings.Index(header, "ID ")
		for _, l := range lines[1:] {
			if !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} \S+ +added `).MatchString(l) {
				t.Errorf("line without a time and zone: %q", l)
			}
			if idx := strings.Index(l, " w-") + 1; idx == 0 || len([]rune(l[:idx])) != idCol {
				t.Errorf("the id is not under ID (column %d):\n%s\n%s", idCol, header, l)
			}
		}
		if strings.Contains(out.String(), long) || !strings.Contains(out.String(), "…") {
			t.Errorf("a long name was not cut:\n%s", out)
		}

		// wide: nothing cut; no hint when stderr is not a terminal.
		out, errb, stop = watchIn(t, false, "--dsn", dsn, "-o", "wide")
		waitForCond(t, "snapshot", func() bool { return strings.Count(out.String(), "\n") >= 3 })
		stop()
		if !strings.Contains(out.String(), long) || errb.String() != "" {
			t.Fatalf("wide:\n%s\nstderr %q", out, errb)
		}

		// json: each event carries the time this watcher received it.
		before := time.Now().Add(-time.Millisecond)
		out, _, stop = watchIn(t, false, "--dsn", dsn, "--json")
		if _, err := cat.Register(ctx, switchboard.Instance{ID: "n-1", Name: "bare", Type: "t", Address: "127.0.0.1:3"}); err != nil {
			t.Fatal(err)
		}
		waitForCond(t, "json events", func() bool { return strings.Count(out.String(), "\n") >= 3 })
		stop()
		after := time.Now().Add(time.Millisecond)
		for l := range strings.Lines(out.String()) {
			var ev struct {
				Time  string `json:"time"`
				Event string `json:"event"`
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Event != "added" {
				t.Fatalf("line %q: %v", l, err)
			}
			at, err := time.Parse(switchboard.TimeFormat, ev.Time)
			if err != nil || !strings.HasSuffix(ev.Time, "Z") || at.Before(before) || at.After(after) {
				t.Fatalf("time %q (%v) not in UTC between the watch's start and end", ev.Time, err)
			}
		}
	})
}

func TestOutputHelpers(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.Local)
	if got := clock(now.Add(-time.Hour), now, "15:04:05"); got != now.Add(-time.Hour).Format("15:04:05 MST") {
		t.Errorf("same day: %q", got)
	}
	if got := clock(now.AddDate(0, 0, -3), now, "15:04:05"); !strings.HasPrefix(got, "2026-11-28 ") {
		t.Errorf("another day: %q", got)
	}
	if got := capsCell([]string{"a", "b"}, false); got != "a,b" {
		t.Errorf("capsCell short: %q", got)
	}
	long := []string{strings.Repeat("x", 63), "b", "c"}
	if got := capsCell(long, false); len(got) > maxCapsWidth+2 || !strings.HasSuffix(got, ",+2 more") {
		t.Errorf("capsCell of a long first token: %q", got)
	}
	if got := capsCell(long, true); got != strings.Join(long, ",") {
		t.Errorf("capsCell whole: %q", got)
	}
	if got := fit("abcdef", 4, false); got != "abc…" {
		t.Errorf("fit cut: %q", got)
	}
	if got := fit("ab", 4, false); got != "ab  " {
		t.Errorf("fit pad: %q", got)
	}
	if got := shellQuote("postgres://u@h/db?sslmode=disable"); got != "'postgres://u@h/db?sslmode=disable'" {
		t.Errorf("shellQuote: %q", got)
	}
	if got := shellQuote("sqlite://.data/switchboard.db"); got != "sqlite://.data/switchboard.db" {
		t.Errorf("shellQuote of a safe word: %q", got)
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote of a quote: %q", got)
	}
}

// A name changed by sanitising is stored as before, and stderr says so.
func TestSanitisedNameNotice(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		for _, tc := range []struct{ typed, stored string }{{"ÜnicodeName", "nicodename"}, {"plain", "plain"}} {
			out, errb := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"register", "--dsn", dsn, "--name", tc.typed, "--type", "w", "--address", "127.0.0.1:1"}, out, errb)
			}()
			waitForCond(t, "registration line", func() bool { return strings.Contains(out.String(), "\n") })
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			var in switchboard.Instance
			if err := json.Unmarshal([]byte(out.String()), &in); err != nil || in.Name != tc.stored {
				t.Fatalf("stored %q (%v), want %q", in.Name, err, tc.stored)
			}
			want := ""
			if tc.typed != tc.stored {
				want = fmt.Sprintf("switchboard: name %q is stored as %q\n", tc.typed, tc.stored)
			}
			if errb.String() != want {
				t.Fatalf("stderr %q, want %q", errb, want)
			}
		}
	})
}

// registerLine runs register in this process until its JSON line, then
// stops it, and returns the instance and stderr.
func registerLine(t *testing.T, args ...string) (switchboard.Instance, string) {
	t.Helper()
	out, errb := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"register"}, args...), out, errb) }()
	t.Cleanup(cancel)
	testkit.WaitUntil(t, "registration line", func() bool { return strings.Contains(out.String(), "\n") })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(out.String()), &in); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	return in, errb.String()
}

// --ttl alone derives the heartbeat; errors name the flag or variable the
// user set; commands that do not heartbeat ignore heartbeat settings.
func TestHeartbeatFromTTL(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		base := []string{"--dsn", dsn, "--name", "a", "--type", "w", "--address", "127.0.0.1:1", "--log-level", "info"}
		in, stderr := registerLine(t, append(base, "--ttl", "2s")...)
		if in.TTL != 2*time.Second || !strings.Contains(stderr, "interval=666.666666ms") {
			t.Fatalf("--ttl 2s: ttl %s, stderr %q (want heartbeat ttl/3)", in.TTL, stderr)
		}
		_, stderr = registerLine(t, append(base, "--ttl", "30s")...)
		if !strings.Contains(stderr, "interval=3s") {
			t.Fatalf("--ttl 30s: stderr %q (want the 3s default)", stderr)
		}
		_, stderr = registerLine(t, append(base, "--ttl", "2s", "--heartbeat", "200ms")...)
		if !strings.Contains(stderr, "interval=200ms") {
			t.Fatalf("--heartbeat given: stderr %q", stderr)
		}
		t.Setenv(envTTL, "1500ms")
		if in, stderr := registerLine(t, base...); in.TTL != 1500*time.Millisecond || !strings.Contains(stderr, "interval=500ms") {
			t.Fatalf("TTL from the environment: ttl %s stderr %q", in.TTL, stderr)
		}
		// A third of a short TTL is under the 10ms floor: the derived
		// heartbeat is the floor, which still fits (at most ttl/2).
		in, stderr = registerLine(t, append(base, "--ttl", "25ms")...)
		if in.TTL != 25*time.Millisecond || !strings.Contains(stderr, "interval=10ms") {
			t.Fatalf("--ttl 25ms: ttl %s, stderr %q (want the 10ms floor)", in.TTL, stderr)
		}
	})

	dsn, _ := dsnIn(t)
	base := []string{"register", "--dsn", dsn, "--name", "a", "--type", "w", "--address", "127.0.0.1:1"}
	code, _, stderr := cli(t, append(base, "--ttl", "2s", "--heartbeat", "5s")...)
	if code != 2 || !strings.HasPrefix(stderr, `switchboard: --heartbeat "5s": `) || strings.Contains(stderr, "heartbeat_interval") {
		t.Fatalf("flags: exit %d stderr %q", code, stderr)
	}
	code, _, stderr = cli(t, append(base, "--ttl", "-1s")...)
	if code != 2 || !strings.HasPrefix(stderr, `switchboard: --ttl "-1s"`) {
		t.Fatalf("bad --ttl: exit %d stderr %q", code, stderr)
	}
	t.Setenv(envHeartbeat, "20s")
	code, _, stderr = cli(t, append(base, "--ttl", "10s")...)
	if code != 2 || !strings.Contains(stderr, envHeartbeat) {
		t.Fatalf("heartbeat from the environment: exit %d stderr %q", code, stderr)
	}
	// ls, watch, reap… never fail on heartbeat settings, even unparsable.
	openCatalog(t, dsn)
	for _, hb := range []string{"20s", "often"} {
		t.Setenv(envHeartbeat, hb)
		if code, stdout, stderr := cli(t, "ls", "--dsn", dsn, "--json"); code != 0 || stdout != "[]\n" {
			t.Fatalf("ls with %s=%s: exit %d stderr %q", envHeartbeat, hb, code, stderr)
		}
		if code, _, stderr := cli(t, "reap", "--dsn", dsn); code != 0 {
			t.Fatalf("reap with %s=%s: exit %d stderr %q", envHeartbeat, hb, code, stderr)
		}
	}
}

// A DSN error names where the DSN came from.
func TestDSNErrorNamesItsSource(t *testing.T) {
	code, _, stderr := cli(t, "ls", "--dsn", "mysql://x")
	if code != 2 || !strings.HasPrefix(stderr, `switchboard: --dsn "mysql://x"`) {
		t.Fatalf("flag: exit %d stderr %q", code, stderr)
	}
	t.Setenv(envDSN, "mysql://y")
	code, _, stderr = cli(t, "ls")
	if code != 2 || !strings.HasPrefix(stderr, "switchboard: "+envDSN+` "mysql://y"`) {
		t.Fatalf("environment: exit %d stderr %q", code, stderr)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	code, viaCmd, _ := cli(t, "version")
	_, viaFlag, _ := cli(t, "--version")
	if code != 0 || viaCmd != viaFlag || !strings.HasPrefix(viaCmd, "switchboard ") {
		t.Fatalf("version %q, --version %q", viaCmd, viaFlag)
	}
	// The built binary reports what `go version -m` reads from it.
	got, err := exec.Command(binary, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	info, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^\tmod\t\S+\t(\S+)`).FindSubmatch(info)
	rev := regexp.MustCompile(`(?m)^\tbuild\tvcs\.revision=(\S+)`).FindSubmatch(info)
	wantVersion := "dev"
	if mod != nil && string(mod[1]) != "(devel)" {
		wantVersion = string(mod[1])
	}
	if !strings.HasPrefix(string(got), "switchboard "+wantVersion+" (") {
		t.Errorf("binary says %q; build info has module version %q", got, wantVersion)
	}
	if rev != nil && !strings.Contains(string(got), "revision "+string(rev[1])) ||
		rev == nil && !strings.Contains(string(got), "no VCS revision") {
		t.Errorf("binary says %q; build info:\n%s", got, info)
	}

	bi := &debug.BuildInfo{GoVersion: "go1.99", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-30T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"}}}
	want := fmt.Sprintf("switchboard v1.2.3 (revision 0123456789abcdef, 2026-11-30T10:00:00Z, modified; go1.99 %s/%s)", runtime.GOOS, runtime.GOARCH)
	if got := formatVersion("v1.2.3", bi); got != want {
		t.Errorf("formatVersion = %q, want %q", got, want)
	}
}

// Completion of ids, names, types and capabilities from the catalog.
func TestCompletion(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		seed(t, dsn)
		complete := func(args ...string) []string {
			t.Helper()
			code, stdout, stderr := cli(t, append([]string{"__complete"}, args...)...)
			if code != 0 {
				t.Fatalf("%v: exit %d %s", args, code, stderr)
			}
			var words []string
			for l := range strings.Lines(stdout) {
				if !strings.HasPrefix(l, ":") {
					words = append(words, strings.SplitN(strings.TrimSpace(l), "\t", 2)[0])
				}
			}
			return words
		}
		if got := complete("deregister", "--dsn", dsn, ""); !slices.Equal(got, []string{"a-1", "b-1", "z-2"}) {
			t.Errorf("ids: %v", got)
		}
		if got := complete("deregister", "--dsn", dsn, "z"); !slices.Equal(got, []string{"z-2"}) {
			t.Errorf("ids with prefix: %v", got)
		}
		if got := complete("ls", "--dsn", dsn, "--name", ""); !slices.Equal(got, []string{"alpha", "zeta"}) {
			t.Errorf("names: %v", got)
		}
		if got := complete("watch", "--dsn", dsn, "--type", ""); !slices.Contains(got, "router") || !slices.Contains(got, "compactor") {
			t.Errorf("types: %v", got)
		}
		if got := complete("register", "--dsn", dsn, "--capability", "capability-number-1"); !slices.Equal(got, []string{"capability-number-10", "capability-number-11"}) {
			t.Errorf("capabilities: %v", got)
		}
		if got := complete("ls", "-o", ""); !slices.Equal(got, []string{"table", "wide", "json"}) {
			t.Errorf("-o: %v", got)
		}
	})
	// A catalog that does not exist yields the well-known values and is
	// not created.
	dsn, path := dsnIn(t)
	code, stdout, _ := cli(t, "__complete", "ls", "--dsn", dsn, "--capability", "st")
	if code != 0 || !strings.Contains(stdout, "storage\t") {
		t.Fatalf("well-known capabilities: %q", stdout)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("completion created the catalog: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Fatalf("completion created the catalog's directory: %v", err)
	}
}
