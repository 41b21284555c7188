package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestDrainCommand: register with --weight and --zone, drain and undrain
// by id (ls shows the state), an unknown id exits 1, a bad weight or zone
// exits 2 and writes nothing, and Ctrl-C drains before it deregisters.
func TestDrainCommand(t *testing.T) {
	for _, be := range []string{"sqlite", "http"} {
		t.Run(be, func(t *testing.T) {
			dsn, _ := dsnIn(t)
			if be == "http" {
				dsn = serveHTTP(t, dsn)
			}
			for _, bad := range [][]string{{"--weight", "0"}, {"--weight", "10001"}, {"--zone", "eu west"}} {
				code, _, stderr := cli(t, append([]string{"register", "--dsn", dsn, "--name", "w", "--type", "writer", "--address", "127.0.0.1:1"}, bad...)...)
				if code != 2 {
					t.Errorf("%v: exit %d, stderr %q", bad, code, stderr)
				}
			}
			p := start(t, "register", "--dsn", dsn, "--name", "web", "--type", "writer", "--address", "127.0.0.1:7001",
				"--id", "web-1", "--weight", "250", "--zone", "eu-1a", "--drain-wait", "300ms")
			var in switchboard.Instance
			if err := json.Unmarshal([]byte(p.line(t)), &in); err != nil || in.Weight != 250 || in.Zone != "eu-1a" {
				t.Fatalf("registered %+v, %v", in, err)
			}
			cat := openCatalog(t, dsn)
			if code, _, stderr := cli(t, "drain", "--dsn", dsn, "nobody"); code != 1 || !strings.Contains(stderr, `no instance with id "nobody"`) {
				t.Fatalf("drain unknown: exit %d, %q", code, stderr)
			}
			// Over a server, another party needs the instance's secret or
			// the admin token: the registering process holds the secret.
			args := []string{"drain", "--dsn", dsn, "web-1"}
			if be == "http" {
				code, _, stderr := cli(t, args...)
				if code != 1 || !strings.Contains(stderr, "secret") {
					t.Fatalf("drain without the secret: exit %d, %q", code, stderr)
				}
				return
			}
			if code, out, stderr := cli(t, args...); code != 0 || !strings.Contains(out, "drained web-1 (status draining)") {
				t.Fatalf("drain: exit %d %q %q", code, out, stderr)
			}
			if code, out, _ := cli(t, "ls", "--dsn", dsn, "-o", "wide"); code != 0 || !strings.Contains(out, "draining") || !strings.Contains(out, "250") || !strings.Contains(out, "eu-1a") {
				t.Fatalf("ls: %q", out)
			}
			if code, out, _ := cli(t, append(args, "--undo")...); code != 0 || !strings.Contains(out, "undrained web-1 (status passing)") {
				t.Fatalf("undo: %q", out)
			}
			ch, err := cat.Watch(t.Context(), switchboard.Query{Name: "web"})
			if err != nil {
				t.Fatal(err)
			}
			waitEvent(t, ch, switchboard.EventAdded, "", "web-1")
			p.cmd.Process.Signal(syscall.SIGINT)
			for ev := range ch {
				if ev.Kind == switchboard.EventSynced {
					continue
				}
				if ev.Kind != switchboard.EventUpdated || !ev.Instance.Draining {
					t.Fatalf("Ctrl-C: first event %+v, want updated, drained", ev)
				}
				break
			}
			waitEvent(t, ch, switchboard.EventRemoved, switchboard.ReasonDeregistered, "web-1")
			if err := p.wait(t); err != nil {
				t.Fatalf("register exit: %v; stderr %s", err, p.stderr)
			}
		})
	}
}

// TestWatchLineShowsTrafficState: watch's table names the traffic state of
// an added or updated instance out of rotation, and a removal's reason.
func TestWatchLineShowsTrafficState(t *testing.T) {
	at := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ev   switchboard.Event
		want string
	}{
		{switchboard.Event{Kind: switchboard.EventUpdated, Instance: switchboard.Instance{Name: "a", Draining: true}}, "updated/draining"},
		{switchboard.Event{Kind: switchboard.EventAdded, Instance: switchboard.Instance{Name: "a", Health: switchboard.Health{Status: switchboard.StatusWarning}}}, "added/warning"},
		{switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonCheckCritical, Instance: switchboard.Instance{Name: "a"}}, "removed/check_critical "},
		{switchboard.Event{Kind: switchboard.EventUpdated, Instance: switchboard.Instance{Name: "a"}}, "updated "},
	} {
		if line := eventLine(tc.ev, at, at, false); !strings.Contains(line, tc.want) {
			t.Errorf("%+v: %q, want %q in it", tc.ev, line, tc.want)
		}
	}
}
