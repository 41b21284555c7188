package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// demoRows lists the rows `serve --demo` made (stale ones included).
func demoRows(t *testing.T, cat switchboard.Catalog) []string {
	t.Helper()
	list, err := cat.List(context.Background(), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range list {
		if in.Metadata["demo"] == "true" {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// TestServeDemoDeregistersCrashedRoleAtShutdown: a demo role that crashed
// (its heartbeats stopped; its row expired but is not reaped) is
// deregistered when the server stops, like the others. The test waits for
// a crash (one life in three ends in one), stops the server at once (the
// role comes back only 2 s after crashing) and looks for demo rows.
func TestServeDemoDeregistersCrashedRoleAtShutdown(t *testing.T) {
	dsn, _ := dsnIn(t)
	t.Setenv(envTTL, "1s") // lives of 1 to 5 s; heartbeat 333 ms
	cat := openCatalog(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := serveProc(t, "--dsn", dsn, "--demo")
	var crashed string
	deadline := time.After(2 * time.Minute)
	for crashed == "" {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the watch ended")
			}
			// Expired, judged by this process's timer: its heartbeats
			// stopped and nobody deregistered it. Only a crash whose row
			// is still there, stale, tests the fix: a role that already
			// came back (or a row already reaped) is waited past.
			if ev.Kind == switchboard.EventRemoved && ev.Reason == switchboard.ReasonExpired && strings.HasPrefix(ev.Instance.ID, "demo-") {
				if in, err := cat.Get(ctx, ev.Instance.ID); err == nil && in.Stale {
					crashed = ev.Instance.ID
				}
			}
		case <-deadline:
			t.Fatalf("no demo role crashed (row left stale) within 2 minutes; stderr %s", srv.stderr)
		}
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, srv.stderr)
	}
	if left := demoRows(t, cat); len(left) != 0 {
		t.Fatalf("rows left behind by serve --demo (%s crashed): %v", crashed, left)
	}
}

// TestServeDemoStopsWhenServingFails: when the HTTP server stops on its own
// (its listener fails) while nobody interrupted, runServe returns the error
// and the demo stops and deregisters its roles; it used to wait for the
// demo forever.
func TestServeDemoStopsWhenServingFails(t *testing.T) {
	dsn, _ := dsnIn(t)
	cat := openCatalog(t, dsn)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	c.Discovery.DSN = dsn
	c.Discovery.TTL, c.Discovery.HeartbeatInterval = 10*time.Second, 3*time.Second
	g := &globals{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, g, cat, ln, c, false, true) }()
	waitForCond(t, "the demo's roles to register", func() bool { return len(demoRows(t, cat)) == len(demoRoles) })
	ln.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("runServe: %v; want the listener's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runServe did not return after its listener failed")
	}
	if left := demoRows(t, cat); len(left) != 0 {
		t.Fatalf("rows left behind: %v", left)
	}
}
