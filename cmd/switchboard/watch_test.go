package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// captureOpened returns a setup for runWith that hands the test every
// catalog the command opens (globals.opened), and what it was handed.
func captureOpened() (setup func(*globals), opened func() []switchboard.Catalog) {
	var mu sync.Mutex
	var cats []switchboard.Catalog
	setup = func(g *globals) {
		g.opened = func(c switchboard.Catalog) {
			mu.Lock()
			cats = append(cats, c)
			mu.Unlock()
		}
	}
	return setup, func() []switchboard.Catalog {
		mu.Lock()
		defer mu.Unlock()
		return append([]switchboard.Catalog(nil), cats...)
	}
}

// watchUntilEnd runs `watch` in this process (runWith, with setup) with a
// context nobody cancels (until cleanup) and returns its output and a
// function that waits for its exit code.
func watchUntilEnd(t *testing.T, setup func(*globals), args ...string) (out, errb *testkit.SyncBuffer, exit func() int) {
	t.Helper()
	out, errb = &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var code int
	go func() {
		defer close(done)
		code = runWith(ctx, setup, append([]string{"watch"}, args...), out, errb)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("watch did not stop at cleanup")
		}
	})
	return out, errb, func() int {
		t.Helper()
		select {
		case <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatalf("watch did not exit after the catalog ended it; stderr %q", errb)
		}
		return -1
	}
}

// closeUnderWatch closes the one catalog the running watch opened and
// checks that the watch then exits 1.
func closeUnderWatch(t *testing.T, opened func() []switchboard.Catalog, exit func() int, errb *testkit.SyncBuffer) {
	t.Helper()
	cats := opened()
	if len(cats) != 1 {
		t.Fatalf("watch opened %d catalogs, want 1", len(cats))
	}
	cats[0].Close()
	if c := exit(); c != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", c, errb)
	}
}

// TestWatchEndedByCatalogFails: when the catalog closes the event stream on
// its own (here its handle is closed under the running watch), watch says
// that the watch ended and why, and exits 1; it used to exit 0 as if
// interrupted.
func TestWatchEndedByCatalogFails(t *testing.T) {
	dsn, _ := dsnIn(t)
	openCatalog(t, dsn)
	setup, opened := captureOpened()
	out, errb, exit := watchUntilEnd(t, setup, "--dsn", dsn)
	waitForCond(t, "the watch header", func() bool { return strings.HasPrefix(out.String(), "TIME") })
	closeUnderWatch(t, opened, exit, errb)
	msg := errb.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "watch ended: the catalog stopped the event stream") ||
		!strings.Contains(msg, switchboard.ErrClosed.Error()) {
		t.Fatalf("stderr %q: want one line saying the watch ended because the catalog closed", msg)
	}
}

// TestWatchEndedAfterOutageNamesLastError: a watch through a server whose
// connection is lost reports the outage and goes on; if the catalog then
// ends the watch, the error names the last catalog error.
func TestWatchEndedAfterOutageNamesLastError(t *testing.T) {
	dsn, _ := dsnIn(t)
	url := serveHTTP(t, dsn)
	proxy := testkit.NewProxy(t, strings.TrimPrefix(url, "http://"))
	setup, opened := captureOpened()
	out, errb, exit := watchUntilEnd(t, setup, "--dsn", "http://"+proxy.Addr())
	waitForCond(t, "the watch header", func() bool { return strings.HasPrefix(out.String(), "TIME") })
	proxy.CutAll()
	waitForCond(t, "the outage on stderr", func() bool { return strings.Contains(errb.String(), "catalog unreachable") })
	closeUnderWatch(t, opened, exit, errb)
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "watch ended: the catalog stopped the event stream; last catalog error: ") ||
		!strings.Contains(last, "watch stream lost") {
		t.Fatalf("last stderr line %q: want the watch ended, with the last catalog error", last)
	}
}

// TestWatchInterruptExitsZero: an interrupt (the command's context ends) is
// how a watch is stopped: exit 0, nothing on stderr.
func TestWatchInterruptExitsZero(t *testing.T) {
	dsn, _ := dsnIn(t)
	openCatalog(t, dsn)
	out, errb, stop := watchIn(t, false, "--dsn", dsn)
	waitForCond(t, "the watch header", func() bool { return strings.HasPrefix(out.String(), "TIME") })
	if c := stop(); c != 0 || errb.String() != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and nothing", c, errb)
	}
}
