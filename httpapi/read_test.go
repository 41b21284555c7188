package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

func TestListGetAndFilters(t *testing.T) {
	s := start(t, httpapi.Options{})
	w := register(t, s, instanceBody("Edge_Writer", "storage", "custom.cap:v2"))
	q := register(t, s, map[string]any{"name": "querier", "type": "querier", "address": "[::1]:50054", "capabilities": []string{"query_execution"}})

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{w.Instance.ID, q.Instance.ID}},
		{"?capability=custom.cap:v2", []string{w.Instance.ID}},
		{"?type=querier", []string{q.Instance.ID}},
		{"?name=Edge_Writer", []string{w.Instance.ID}},
		{"?name=nobody", []string{}},
		{"?all=true", []string{w.Instance.ID, q.Instance.ID}},
	} {
		code, b := call(t, "GET", s.url+"/v1/instances"+tc.query, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", tc.query, code, b)
		}
		var list []switchboard.Instance
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatalf("%s: %v: %s", tc.query, err, b)
		}
		got := []string{}
		for _, in := range list {
			got = append(got, in.ID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("list%s = %v, want %v", tc.query, got, tc.want)
		}
		if strings.Contains(string(b), "secret") {
			t.Fatalf("secret hash listed: %s", b)
		}
	}

	code, b := call(t, "GET", s.url+"/v1/instances/"+w.Instance.ID, nil)
	var got switchboard.Instance
	if code != 200 || json.Unmarshal(b, &got) != nil || got.Name != "edge-writer" || got.Address != "127.0.0.1:4317" {
		t.Fatalf("get: %d %s", code, b)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	for _, k := range []string{"id", "name", "type", "address", "capabilities", "version", "metadata", "ttl", "registered_at", "last_seen", "stale"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("field %q missing from %s", k, b)
		}
	}
	if md := raw["metadata"].(map[string]any); len(md) != 0 {
		t.Fatalf("metadata shows the secret hash: %v", md)
	}
	code, b = call(t, "GET", s.url+"/v1/instances/ghost", nil)
	expectError(t, code, b, 404, "not_found", "")
	code, b = call(t, "GET", s.url+"/v1/instances?capability=a%20b", nil)
	expectError(t, code, b, 400, "invalid", "capability")
	code, b = call(t, "GET", s.url+"/v1/instances?all=maybe", nil)
	expectError(t, code, b, 400, "invalid", "all")
	code, b = call(t, "GET", s.url+"/v1/nothing-here", nil)
	expectError(t, code, b, 404, "not_found", "")
	code, b = call(t, "POST", s.url+"/v1/instances", "{}")
	expectError(t, code, b, 405, "method_not_allowed", "")
	if !strings.Contains(string(b), "GET, PUT") {
		t.Fatalf("405 does not say what is allowed: %s", b)
	}
}

func expectError(t *testing.T, code int, b []byte, status int, errCode, field string) {
	t.Helper()
	var e httpapi.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body not JSON (%d): %s", code, b)
	}
	if code != status || e.Code != errCode || e.Field != field || e.Error == "" {
		t.Fatalf("got %d %+v, want %d code %s field %q", code, e, status, errCode, field)
	}
}

func TestWatchSnapshotDeltasAndResume(t *testing.T) {
	s := start(t, httpapi.Options{KeepAlive: 50 * time.Millisecond})
	a := register(t, s, instanceBody("a", "storage"))
	b := register(t, s, instanceBody("b", "search"))

	w := watchSSE(t, s.url+"/v1/watch")
	snap := w.next(t)
	if snap.event != "snapshot" || snap.data["fresh"] != false || snap.data["instances"] != float64(2) || snap.id != "" {
		t.Fatalf("snapshot marker: %+v", snap)
	}
	for _, want := range []string{a.Instance.ID, b.Instance.ID} {
		ev := w.next(t)
		expectEvent(t, ev, "added", "", want)
		if ev.id != "" {
			t.Fatalf("snapshot event with an id: %+v", ev)
		}
	}
	synced := w.next(t)
	if synced.event != "synced" || synced.id == "" {
		t.Fatalf("synced: %+v", synced)
	}

	// A filtered watch sees only its own.
	f := watchSSE(t, s.url+"/v1/watch?capability=search")
	if ev := f.next(t); ev.event != "snapshot" {
		t.Fatal(ev)
	}
	expectEvent(t, f.next(t), "added", "", b.Instance.ID)
	f.next(t) // synced

	c := register(t, s, instanceBody("c", "storage"))
	ev := w.next(t)
	expectEvent(t, ev, "added", "", c.Instance.ID)
	if ev.id == "" || ev.id == synced.id {
		t.Fatalf("delta id: %+v", ev)
	}
	upd := instanceBody("a", "storage")
	upd["id"] = a.Instance.ID
	upd["version"] = "2.0.0"
	register(t, s, upd, httpapi.SecretHeader, a.Secret)
	ev = w.next(t)
	expectEvent(t, ev, "updated", "", a.Instance.ID)
	if !strings.Contains(ev.raw, `"version":"2.0.0"`) {
		t.Fatalf("update content: %s", ev.raw)
	}
	lastSeen := ev.id
	if code, body := call(t, "DELETE", s.url+"/v1/instances/"+b.Instance.ID, nil, httpapi.SecretHeader, b.Secret); code != 204 {
		t.Fatalf("deregister: %d %s", code, body)
	}
	expectEvent(t, w.next(t), "removed", "deregistered", b.Instance.ID)
	expectEvent(t, f.next(t), "removed", "deregistered", b.Instance.ID)

	// Keep-alive comments arrive while nothing happens.
	deadline := time.After(20 * time.Second)
	for got := false; !got; {
		select {
		case e := <-w.events:
			got = e.event == "comment" && e.raw == ": keep-alive"
		case <-deadline:
			t.Fatal("no keep-alive comment")
		}
	}

	// Resume from the update: the removal is replayed, nothing before it.
	w.cancel()
	r := watchSSE(t, s.url+"/v1/watch", "Last-Event-ID", lastSeen)
	expectEvent(t, r.next(t), "removed", "deregistered", b.Instance.ID)
	if ev := r.next(t); ev.event != "synced" || ev.id == "" {
		t.Fatalf("after replay: %+v", ev)
	}
	d := register(t, s, instanceBody("d"))
	expectEvent(t, r.next(t), "added", "", d.Instance.ID)

	// An id from another server (or run) gets a fresh snapshot, marked.
	x := watchSSE(t, s.url+"/v1/watch", "Last-Event-ID", "deadbeef-3")
	ev = x.next(t)
	if ev.event != "snapshot" || ev.data["fresh"] != true || ev.data["instances"] != float64(3) {
		t.Fatalf("fresh snapshot marker: %+v", ev)
	}
}

// TestWatchHistoryOverrun: a resume from an id older than the history kept
// resumes from the catalog's change log, by the position the id carries
// (one event per instance changed, then synced); without a position it
// gets a fresh snapshot.
func TestWatchHistoryOverrun(t *testing.T) {
	s := start(t, httpapi.Options{History: 4})
	w := watchSSE(t, s.url+"/v1/watch")
	w.next(t) // snapshot
	first := w.next(t)
	if first.event != "synced" {
		t.Fatal(first)
	}
	w.cancel()
	for i := 0; i < 6; i++ {
		register(t, s, instanceBody("n"))
	}
	testkit_WaitFeed(t, s, 6)
	if !strings.Contains(first.id, "~") {
		t.Fatalf("synced id %q carries no catalog position", first.id)
	}
	r := watchSSE(t, s.url+"/v1/watch?all=true", "Last-Event-ID", first.id)
	updated := 0
	for ev := r.next(t); ev.event != "synced"; ev = r.next(t) {
		if ev.event != "updated" {
			t.Fatalf("resumed from the log: want updated events then synced, got %+v", ev)
		}
		updated++
	}
	if updated != 6 {
		t.Fatalf("resumed from the log: %d updated events, want 6", updated)
	}
	local, _, _ := strings.Cut(first.id, "~")
	x := watchSSE(t, s.url+"/v1/watch?all=true", "Last-Event-ID", local)
	if ev := x.next(t); ev.event != "snapshot" || ev.data["fresh"] != true || ev.data["instances"] != float64(6) {
		t.Fatalf("without a position: want a fresh snapshot of 6, got %+v", ev)
	}
}

// testkit_WaitFeed waits until the server's mirror counts n instances.
func testkit_WaitFeed(t *testing.T, s *srv, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var info httpapi.Info
		_, b := call(t, "GET", s.url+"/v1/info", nil)
		json.Unmarshal(b, &info)
		if info.Instances.Active+info.Instances.Stale == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror never reached %d instances: %s", n, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInfoHealthzMetricsLeasesUI(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("dashboard")) })
	s := start(t, httpapi.Options{UI: ui, DSN: "postgres://sb:hunter2@db.example:5432/x?sslmode=require&sslpassword=keypass"})
	register(t, s, instanceBody("a"))
	testkit_WaitFeed(t, s, 1)
	code, b := call(t, "GET", s.url+"/v1/info", nil)
	var info httpapi.Info
	if code != 200 || json.Unmarshal(b, &info) != nil {
		t.Fatalf("info: %d %s", code, b)
	}
	if info.Backend != "postgres" || strings.Contains(info.DSN, "hunter2") || strings.Contains(info.DSN, "keypass") || !strings.Contains(info.DSN, "db.example") ||
		!info.Healthy || info.Instances.Active != 1 || info.SelfPreservation == nil {
		t.Fatalf("info: %s", b)
	}
	if code, b := call(t, "GET", s.url+"/healthz", nil); code != 200 || !strings.Contains(string(b), "ok") {
		t.Fatalf("healthz: %d %s", code, b)
	}
	code, b = call(t, "GET", s.url+"/metrics", nil)
	for _, want := range []string{`switchboard_http_requests_total{code="200",route="healthz"} 1`, "switchboard_http_registrations_total 1",
		"switchboard_catalog_reachable 1", "switchboard_http_sse_subscribers 0", "switchboard_http_propagation_seconds_bucket"} {
		if code != 200 || !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	if code, b := call(t, "GET", s.url+"/", nil); code != 200 || string(b) != "dashboard" {
		t.Fatalf("ui: %d %s", code, b)
	}

	leaser := s.cat.(switchboard.Leaser)
	if _, err := leaser.Acquire(t.Context(), "compactor-lock", "pod-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	code, b = call(t, "GET", s.url+"/v1/leases", nil)
	var ls []httpapi.LeaseJSON
	if code != 200 || json.Unmarshal(b, &ls) != nil || len(ls) != 1 || ls[0].Holder != "pod-a" || !ls[0].Held || ls[0].TTL != "1m0s" || ls[0].Token < 1 {
		t.Fatalf("leases: %d %s", code, b)
	}
}

func TestHealthzUnreachable(t *testing.T) {
	s := start(t, httpapi.Options{})
	s.cat.Close()
	code, b := call(t, "GET", s.url+"/healthz", nil)
	expectError(t, code, b, 503, "unavailable", "")
	code, b = call(t, "GET", s.url+"/v1/instances", nil)
	expectError(t, code, b, 503, "unavailable", "")
}

// TestWatchWithoutMirror: a server whose catalog cannot be watched answers
// watches with 503 instead of hanging.
func TestWatchWithoutMirror(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	cat.Close()
	s := serveOn(t, cat, httpapi.Options{})
	code, b := call(t, "GET", s.url+"/v1/watch", nil)
	expectError(t, code, b, 503, "unavailable", "")
	code, b = call(t, "GET", s.url+"/v1/info", nil)
	var info httpapi.Info
	if code != 200 || json.Unmarshal(b, &info) != nil || info.Healthy || info.Error == "" {
		t.Fatalf("info of a server without its catalog: %d %s", code, b)
	}
}

// TestSlowSubscriber: a subscriber that never reads blocks nobody and
// holds no queue: the others get every event, and it is disconnected once
// a write to it has been stuck for WriteTimeout.
func TestSlowSubscriber(t *testing.T) {
	// The write timeout is what separates a stuck subscriber from a slow
	// one: the fast reader below must drain each 250 KiB event within it,
	// which on a loaded machine (load average 10–25 on two cores) 2 s did
	// not always give it.
	const writeTimeout = 5 * time.Second
	s := start(t, httpapi.Options{WriteTimeout: writeTimeout, History: 8})
	stuckSubscriber(t, s)
	fast := watchSSE(t, s.url+"/v1/watch")
	fast.next(t) // snapshot
	fast.next(t) // synced
	testkit.WaitUntil(t, "both subscribers", func() bool { return metricValue(t, s, "switchboard_http_sse_subscribers") == 2 })

	// 24 registrations of 250 KiB each: more than the socket buffers hold.
	big := `{"blob":"` + strings.Repeat("x", 250<<10) + `"}`
	for i := 0; i < 24; i++ {
		body := instanceBody(fmt.Sprintf("big-%d", i))
		body["components"] = json.RawMessage(big)
		body["ttl"] = "5m"
		r := register(t, s, body)
		expectEvent(t, fast.next(t), "added", "", r.Instance.ID)
	}
	// Dropped one write timeout after its write blocked; the bound is
	// generous so that only a subscriber never dropped fails.
	for deadline := time.Now().Add(12 * writeTimeout); metricValue(t, s, "switchboard_http_sse_subscribers") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stuck subscriber was not dropped within %v (write timeout %v)", 12*writeTimeout, writeTimeout)
		}
	}
}

// stuckSubscriber opens a watch on s that never reads (a small receive
// buffer, so the server's writes block soon), closed at cleanup.
func stuckSubscriber(t *testing.T, s *srv) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	return conn
}
