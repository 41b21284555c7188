package remote_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/idgen/idgentest"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
	"github.com/switchboard-io/switchboard/remote"
)

func inst(name string) switchboard.Instance {
	return switchboard.Instance{Name: name, Type: "writer", Address: "127.0.0.1:4317", TTL: time.Minute}
}

// recorder collects a watch's events.
type recorder struct {
	t  *testing.T
	ch <-chan switchboard.Event
}

func (r recorder) next() switchboard.Event {
	r.t.Helper()
	select {
	case ev, ok := <-r.ch:
		if !ok {
			r.t.Fatal("watch closed")
		}
		return ev
	case <-time.After(20 * time.Second):
		r.t.Fatal("no event within 20 s")
	}
	return switchboard.Event{}
}

// until collects events up to and including the next synced.
func (r recorder) untilSynced() []string {
	r.t.Helper()
	var out []string
	for {
		ev := r.next()
		if ev.Kind == switchboard.EventSynced {
			slices.Sort(out)
			return out
		}
		if ev.Kind == switchboard.EventError {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s %s", ev.Kind, ev.Reason, ev.Instance.Name))
	}
}

func watchAll(t *testing.T, c switchboard.Catalog) recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return recorder{t, ch}
}

func mustRegister(t *testing.T, c switchboard.Catalog, in switchboard.Instance) switchboard.Instance {
	t.Helper()
	out, err := c.Register(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWatchResume cuts a watcher's connection to the server while the
// catalog changes, twice: first within the server's history (the events
// are replayed), then past it (the catalog resumes the watch from its
// change log, by the position the event id carries): either way the
// watcher gets exactly the differences, with the true reasons, then
// synced.
func TestWatchResume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
	}{{"replayed", 10000}, {"past the server's history", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cat := testkit.OpenSQLite(t)
			url, _ := serve(t, cat, httpapi.Options{History: tc.history})
			p := testkit.NewProxy(t, strings.TrimPrefix(url, "http://"))
			writer := client(t, url, remote.Config{})
			watcher := client(t, "http://"+p.Addr(), remote.Config{})

			a := mustRegister(t, writer, inst("a"))
			b := mustRegister(t, writer, inst("b"))
			mortal := inst("mortal")
			mortal.TTL = 500 * time.Millisecond
			m := mustRegister(t, writer, mortal)
			w := watchAll(t, watcher)
			if got := w.untilSynced(); !slices.Equal(got, []string{"added/ a", "added/ b", "added/ mortal"}) {
				t.Fatalf("snapshot: %v", got)
			}
			// mortal expires while connected: seen live.
			if ev := w.next(); ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonExpired || ev.Instance.ID != m.ID {
				t.Fatalf("expiry: %+v", ev)
			}
			p.CutAll()
			if ev := w.next(); ev.Kind != switchboard.EventError {
				t.Fatalf("want an error event on the lost stream, got %+v", ev)
			}
			if err := writer.Deregister(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			c := mustRegister(t, writer, inst("c"))
			upd := b
			upd.Version = "2"
			mustRegister(t, writer, upd)
			mustRegister(t, writer, inst("d"))
			if err := writer.Deregister(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
			// The server's mirror has seen it all before the watcher returns.
			testkit.WaitUntil(t, "server mirror", func() bool {
				st := writer.WatchStats()
				return st.Instances == 3 // b, d, and mortal (stale, not reaped)
			})
			p.Restore()
			// Resumed from the catalog's log: one event per instance that
			// changed (c came and went: its removal names an instance the
			// watcher never saw, and is not shown).
			want := []string{"added/ d", "removed/deregistered a", "updated/ b"}
			if tc.history == 10000 {
				// Replayed: c came and went, both seen.
				want = []string{"added/ c", "added/ d", "removed/deregistered a", "removed/deregistered c", "updated/ b"}
			}
			if got := w.untilSynced(); !slices.Equal(got, want) {
				t.Fatalf("after the outage: %v, want %v", got, want)
			}
			e := mustRegister(t, writer, inst("e"))
			if ev := w.next(); ev.Kind != switchboard.EventAdded || ev.Instance.ID != e.ID {
				t.Fatalf("live after resume: %+v", ev)
			}
		})
	}
}

// A registration without an id gets one from the client: a UUID v4 with
// the client's prefix (its rows sit together in a SQLite catalog behind the
// server), which the server accepts as any new id and secures as usual.
func TestClientGeneratesItsIDs(t *testing.T) {
	ctx := context.Background()
	url, _ := serve(t, testkit.OpenSQLite(t), httpapi.Options{})
	a, b := client(t, url, remote.Config{}), client(t, url, remote.Config{})
	prefix := func(c *remote.Client) string {
		t.Helper()
		var first string
		for range 5 {
			in := mustRegister(t, c, inst("gen"))
			idgentest.RequireV4(t, in.ID)
			if first == "" {
				first = in.ID[:8]
			} else if in.ID[:8] != first {
				t.Fatalf("one client's ids start %s and %s", first, in.ID[:8])
			}
			if missing, err := c.Heartbeat(ctx, in.ID); err != nil || len(missing) > 0 {
				t.Fatalf("heartbeat of %s: %v, missing %v", in.ID, err, missing)
			}
		}
		return first
	}
	if pa, pb := prefix(a), prefix(b); pa == pb {
		t.Fatalf("two clients' ids both start %s", pa)
	}
}

// TestSecretsAcrossClients: a second client cannot renew, re-register or
// deregister the first one's registration.
func TestSecretsAcrossClients(t *testing.T) {
	ctx := context.Background()
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	owner := client(t, url, remote.Config{})
	other := client(t, url, remote.Config{})
	in := inst("owned")
	in.ID = "owned-1"
	mustRegister(t, owner, in)
	// Refused by the server (not this client's row): reported missing,
	// not renewed.
	if missing, err := other.Heartbeat(ctx, "owned-1"); err != nil || !slices.Equal(missing, []string{"owned-1"}) {
		t.Fatalf("foreign heartbeat: %v, %v", missing, err)
	}
	if err := other.Deregister(ctx, "owned-1"); !errors.Is(err, remote.ErrUnauthorized) {
		t.Fatalf("foreign deregister: %v", err)
	}
	in.Address = "10.0.0.1:1"
	if _, err := other.Register(ctx, in); !errors.Is(err, remote.ErrUnauthorized) {
		t.Fatalf("foreign re-register: %v", err)
	}
	if missing, err := owner.Heartbeat(ctx, "owned-1"); err != nil || len(missing) != 0 {
		t.Fatalf("own heartbeat: %v %v", missing, err)
	}
	if got, _ := owner.Get(ctx, "owned-1"); got.Address != "127.0.0.1:4317" {
		t.Fatalf("row changed by a foreign client: %+v", got)
	}
	if err := owner.Deregister(ctx, "owned-1"); err != nil {
		t.Fatal(err)
	}
	// Bootstrap works unchanged over the remote catalog: register,
	// heartbeat, re-register when the row is gone, deregister on Close.
	reg, err := switchboard.Bootstrap(ctx, owner, inst("booted"), switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "heartbeats", func() bool { return reg.Stats().Heartbeats >= 2 })
	// The row is removed directly on the backend: the next heartbeat
	// finds it missing and registers it again, with the same secret.
	if err := cat.Deregister(ctx, reg.ID()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "re-registration", func() bool { return reg.Stats().Reregistrations >= 1 })
	if err := other.Deregister(ctx, reg.ID()); !errors.Is(err, remote.ErrUnauthorized) {
		t.Fatalf("foreign deregister of the re-registered row: %v", err)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestTokenAndTLS: a client with the token and the server's certificate
// works; without the token it gets ErrUnauthorized, with a wrong one
// ErrForbidden; an untrusted certificate fails.
func TestTokenAndTLS(t *testing.T) {
	api := httpapi.New(testkit.OpenSQLite(t), httpapi.Options{Token: "t0ken", Logger: quiet})
	t.Cleanup(func() { api.Close() })
	ts := httptest.NewUnstartedServer(api)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	tlsCfg := &tls.Config{RootCAs: pool}
	ctx := context.Background()

	good := client(t, ts.URL, remote.Config{Token: "t0ken", TLS: tlsCfg})
	r := mustRegister(t, good, inst("secure"))
	w := watchAll(t, good)
	if got := w.untilSynced(); len(got) != 1 {
		t.Fatalf("watch over TLS: %v", got)
	}
	if _, err := client(t, ts.URL, remote.Config{TLS: tlsCfg}).List(ctx, switchboard.Query{}); !errors.Is(err, remote.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	if _, err := client(t, ts.URL, remote.Config{Token: "nope", TLS: tlsCfg}).Get(ctx, r.ID); !errors.Is(err, remote.ErrForbidden) {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := client(t, ts.URL, remote.Config{Token: "nope", TLS: tlsCfg}).Watch(ctx, switchboard.Query{}); !errors.Is(err, remote.ErrForbidden) {
		t.Fatalf("watch with a wrong token: %v", err)
	}
	if _, err := client(t, ts.URL, remote.Config{Token: "t0ken"}).List(ctx, switchboard.Query{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
}

// TestTwoServersOnePostgres: a registration through server A reaches a
// watcher on server B through PostgreSQL's push; both catalogs poll only
// every hour, so nothing else could carry it.
func TestTwoServersOnePostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t, testDSN)
	open := func() switchboard.Catalog {
		cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: quiet, PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		return cat
	}
	urlA, _ := serve(t, open(), httpapi.Options{})
	urlB, _ := serve(t, open(), httpapi.Options{})
	onA := client(t, urlA, remote.Config{})
	onB := client(t, urlB, remote.Config{})
	w := watchAll(t, onB)
	if got := w.untilSynced(); len(got) != 0 {
		t.Fatalf("snapshot: %v", got)
	}
	in := mustRegister(t, onA, inst("via-a"))
	if ev := w.next(); ev.Kind != switchboard.EventAdded || ev.Instance.ID != in.ID {
		t.Fatalf("on B: %+v", ev)
	}
	// The secret travels with the row: B accepts A's client's heartbeat.
	hb := client(t, urlB, remote.Config{})
	if missing, err := hb.Heartbeat(ctx, in.ID); err != nil || !slices.Equal(missing, []string{in.ID}) {
		t.Fatalf("heartbeat without the secret via B: %v, %v (want it refused: missing)", missing, err)
	}
	if err := onA.Deregister(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if ev := w.next(); ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonDeregistered {
		t.Fatalf("removal on B: %+v", ev)
	}
}

// TestReapGraceLeavesReapingToAServerThatReaps: a Bootstrap's reaper
// (ReapGrace) asks a server that runs its own reaper once, then leaves
// reaping to it; a server without one is asked every time. Reap (an
// operator's explicit reap) always reaches the server.
func TestReapGraceLeavesReapingToAServerThatReaps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     int64 // reap requests the server sees for three ReapGrace calls
	}{
		{"server reaps", time.Hour, 1},
		{"server does not reap", -1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := httpapi.New(testkit.OpenSQLite(t), httpapi.Options{ReapInterval: tc.interval, Logger: quiet})
			t.Cleanup(func() { api.Close() })
			var reaps atomic.Int64
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/reap" {
					reaps.Add(1)
				}
				api.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			c := client(t, hs.URL, remote.Config{})
			ctx := context.Background()
			for range 3 {
				if _, err := c.ReapGrace(ctx, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if got := reaps.Load(); got != tc.want {
				t.Fatalf("%d reap requests for 3 ReapGrace calls, want %d", got, tc.want)
			}
			if _, err := c.Reap(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if got := reaps.Load(); got != tc.want+1 {
				t.Fatalf("Reap did not reach the server: %d requests", got)
			}
		})
	}
}

// TestLeaseSecretsAcrossClients: a lease a client acquired through the
// server carries a secret that client keeps: it renews, re-acquires and
// releases with it; another client (another process) naming the same
// holder and the token it read from the list can neither take, renew nor
// release it.
func TestLeaseSecretsAcrossClients(t *testing.T) {
	url, _ := serve(t, testkit.OpenSQLite(t), httpapi.Options{ReapInterval: -1})
	owner, thief := client(t, url, remote.Config{}), client(t, url, remote.Config{})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "lock", "pod-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := thief.Acquire(ctx, "lock", "pod-a", time.Minute); !errors.Is(err, switchboard.ErrLeaseHeld) {
		t.Fatalf("another client acquiring as the holder: %v", err)
	}
	listed, err := thief.Leases(ctx)
	if err != nil || len(listed) != 1 || listed[0].Holder != "pod-a" {
		t.Fatalf("leases: %+v %v", listed, err)
	}
	if _, err := thief.Renew(ctx, listed[0]); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("another client renewing with the listed token: %v", err)
	}
	if err := thief.Release(ctx, listed[0]); !errors.Is(err, switchboard.ErrLeaseLost) {
		t.Fatalf("another client releasing with the listed token: %v", err)
	}
	if _, err := owner.Renew(ctx, l); err != nil {
		t.Fatalf("the owner's renewal: %v", err)
	}
	if again, err := owner.Acquire(ctx, "lock", "pod-a", time.Minute); err != nil || again.Token != l.Token {
		t.Fatalf("the owner acquiring again: %+v %v", again, err)
	}
	if err := owner.Release(ctx, l); err != nil {
		t.Fatalf("the owner's release: %v", err)
	}
	if _, err := thief.Acquire(ctx, "lock", "pod-b", time.Minute); err != nil {
		t.Fatalf("a released lease is free for anyone: %v", err)
	}
}

// TestLeasesThroughOlderServer: a server of an earlier release knows
// leases without secrets: it refuses a request body with a field it does
// not know (a secret) and returns none. The client's acquire sends its
// own secret in the X-Lease-Secret header alone, so that server takes the
// lease, and its renewal and release carry no secret either.
func TestLeasesThroughOlderServer(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "op header-secret?"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, ok := strings.CutPrefix(r.URL.Path, "/v1/leases/")
		if !ok || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		// The lease request of the earlier release, decoded as it did.
		var req struct {
			Name   string `json:"name"`
			Holder string `json:"holder"`
			Token  int64  `json:"token"`
			TTL    string `json:"ttl"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":%q,"code":"invalid"}`, err.Error())
			return
		}
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %t", op, r.Header.Get(httpapi.LeaseSecretHeader) != ""))
		mu.Unlock()
		if op == "release" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":%q,"holder":%q,"token":7,"ttl":"1m0s","expires_at":"2026-01-01T00:00:00Z","held":true}`, req.Name, req.Holder)
	}))
	t.Cleanup(hs.Close)
	c := client(t, hs.URL, remote.Config{})
	ctx := context.Background()
	l, err := c.Acquire(ctx, "lock", "pod-a", time.Minute)
	if err != nil || l.Token != 7 {
		t.Fatalf("Acquire: %+v %v", l, err)
	}
	if _, err := c.Renew(ctx, l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := c.Acquire(ctx, "lock", "pod-a", time.Minute); err != nil {
		t.Fatalf("Acquire again: %v", err)
	}
	if err := c.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "[acquire true renew false acquire true release false]"; fmt.Sprint(seen) != want {
		t.Fatalf("requests (op, secret header): %v; want %v", seen, want)
	}
}

// TestLeasesReadsEveryPage: Leases follows the server's pages (the name
// each page says the next starts after) until the last, and reads a
// server that sends everything in one page without the header.
func TestLeasesReadsEveryPage(t *testing.T) {
	pages := map[string]string{
		"":  `[{"name":"a","holder":"h","token":1,"ttl":"1s","expires_at":"2026-01-01T00:00:00Z"}]`,
		"a": `[{"name":"b","holder":"","token":2,"ttl":"1s","expires_at":"2026-01-01T00:00:00Z"}]`,
	}
	var asked []string
	var mu sync.Mutex
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("after")
		mu.Lock()
		asked = append(asked, after)
		mu.Unlock()
		if after == "" {
			w.Header().Set("X-Next-After", "a")
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, pages[after])
	}))
	t.Cleanup(hs.Close)
	c := client(t, hs.URL, remote.Config{})
	got, err := c.Leases(context.Background())
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || fmt.Sprint(asked) != "[ a]" {
		t.Fatalf("Leases: %+v %v; asked for pages after %q", got, err, asked)
	}
}
