package remote_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/remote"
)

// TestServerRestartKeepsReasons: a client watches through a server; the
// server stops; meanwhile one instance is deregistered and another
// changes; a new server (a new process: another catalog handle, another
// history of events) comes up on the same address. The client resumes from
// its last event id, which names the catalog's position, and hears the
// removal as deregistered, not as a guess from a fresh snapshot.
func TestServerRestartKeepsReasons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	open := func() switchboard.Catalog {
		cat, err := switchboard.Open(context.Background(), "sqlite://"+path, switchboard.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		return cat
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	start := func(ln net.Listener, cat switchboard.Catalog) (stop func()) {
		api := httpapi.New(cat, httpapi.Options{Logger: slog.New(slog.DiscardHandler), ReapInterval: -1})
		hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
		go hs.Serve(ln)
		return func() {
			api.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hs.Shutdown(ctx)
		}
	}
	catA := open()
	stopA := start(ln, catA)
	url := "http://" + addr
	watcher := client(t, url, remote.Config{})
	// Through the server, which answers once its mirror shows the write.
	writer := client(t, url, remote.Config{})
	leaving := mustRegister(t, writer, inst("leaving"))
	staying := mustRegister(t, writer, inst("staying"))
	w := watchAll(t, watcher)
	if got := w.untilSynced(); len(got) != 2 {
		t.Fatalf("snapshot: %v", got)
	}
	stopA()
	if ev := w.next(); ev.Kind != switchboard.EventError {
		t.Fatalf("want an error event on the lost stream, got %+v", ev)
	}
	// While no server runs.
	if err := catA.Deregister(context.Background(), leaving.ID); err != nil {
		t.Fatal(err)
	}
	upd := staying
	upd.Version = "2"
	mustRegister(t, catA, upd)

	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	defer start(ln2, open())()
	want := []string{"removed/deregistered leaving", "updated/ staying"}
	if got := w.untilSynced(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after the restart: %v, want %v", got, want)
	}
	late := mustRegister(t, catA, inst("late"))
	if ev := w.next(); ev.Kind != switchboard.EventAdded || ev.Instance.ID != late.ID {
		t.Fatalf("live after the restart: %+v", ev)
	}
}
