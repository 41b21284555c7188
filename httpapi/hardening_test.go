package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// registerMany registers n rows directly on the backend (no secret) and
// returns their ids.
func registerMany(t *testing.T, cat switchboard.Catalog, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				ids[i] = fmt.Sprintf("many-%05d", i)
				_, err := cat.Register(context.Background(), switchboard.Instance{ID: ids[i], Name: "many", Type: "t", Address: "127.0.0.1:1", TTL: time.Hour})
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// TestHeartbeatBatchOverCatalogLimit: the server gathers the heartbeats of
// every client for one window into one Catalog.Heartbeat call, which takes
// at most switchboard.MaxHeartbeatIDs ids. Two clients that each renew
// 5,001 registrations (well within the limit of one request) in the same
// window must both be renewed, not both refused because their union is
// over the catalog's per-call limit.
func TestHeartbeatBatchOverCatalogLimit(t *testing.T) {
	const per = switchboard.MaxHeartbeatIDs/2 + 1
	s := start(t, httpapi.Options{HeartbeatWindow: 2 * time.Second, ReapInterval: -1})
	ids := registerMany(t, s.cat, 2*per)
	testkit_WaitFeed(t, s, 2*per)
	type result struct {
		code int
		body []byte
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for c := 0; c < 2; c++ {
		var req httpapi.HeartbeatRequest
		for _, id := range ids[c*per : (c+1)*per] {
			req.Instances = append(req.Instances, httpapi.HeartbeatItem{ID: id})
		}
		body, _ := json.Marshal(req)
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			resp, err := http.Post(s.url+"/v1/heartbeats", "application/json", bytes.NewReader(body))
			if err != nil {
				results[c] = result{0, []byte(err.Error())}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			results[c] = result{resp.StatusCode, b}
		}(c)
	}
	wg.Wait()
	for c, r := range results {
		var hr httpapi.HeartbeatResponse
		if r.code != 200 || json.Unmarshal(r.body, &hr) != nil || len(hr.Missing) != 0 {
			t.Errorf("client %d: %d %.300s", c, r.code, r.body)
		}
	}
}

// TestStuckSubscriberInSnapshot: a subscriber that never reads is
// disconnected once a write to it has been stuck for WriteTimeout, also
// when it is stuck in its first snapshot (larger than the socket buffers),
// not only once it streams changes.
func TestStuckSubscriberInSnapshot(t *testing.T) {
	s := start(t, httpapi.Options{WriteTimeout: time.Second, ReapInterval: -1})
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 250<<10) + `"}`)
	for i := 0; i < 40; i++ {
		if _, err := s.cat.Register(context.Background(), switchboard.Instance{Name: fmt.Sprintf("big-%d", i), Type: "t",
			Address: "127.0.0.1:1", TTL: time.Hour, Components: big}); err != nil {
			t.Fatal(err)
		}
	}
	testkit_WaitFeed(t, s, 40)
	stuckSubscriber(t, s)
	testkit.WaitUntil(t, "the subscriber", func() bool { return metricValue(t, s, "switchboard_http_sse_subscribers") == 1 })
	testkit.WaitUntil(t, "the stuck subscriber to be dropped", func() bool { return metricValue(t, s, "switchboard_http_sse_subscribers") == 0 })
}

// TestMirrorEnded: when the server's watch of its catalog ends (the
// catalog was closed under it), the server says so: its subscribers get an
// error event and then their streams end (rather than keep-alives for
// ever, which would hold a client behind a load balancer on this server),
// /v1/info is unhealthy, and a new watch is refused with 503 instead of
// being served a snapshot nothing will ever update.
func TestMirrorEnded(t *testing.T) {
	s := start(t, httpapi.Options{KeepAlive: 50 * time.Millisecond})
	register(t, s, instanceBody("a"))
	w := watchSSE(t, s.url+"/v1/watch")
	for ev := w.next(t); ev.event != "synced"; ev = w.next(t) {
	}
	s.cat.Close()
	// Keep-alives go on either way: wait for the next event within a bound.
	deadline := time.After(20 * time.Second)
	for got := false; !got; {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatal("stream ended without an error event")
			}
			if ev.event == "comment" {
				continue
			}
			if ev.event != "error" || ev.data["error"] == "" {
				t.Fatalf("want an error event once the mirror has stopped, got %s %s", ev.event, ev.raw)
			}
			got = true
		case <-deadline:
			t.Fatal("no error event within 20 s of the mirror stopping (only keep-alives)")
		}
	}
	for ended := false; !ended; {
		select {
		case ev, ok := <-w.events:
			if !ok {
				ended = true
			} else if ev.event != "comment" {
				t.Fatalf("after the error event of a stopped mirror: %s %s, want the stream to end", ev.event, ev.raw)
			}
		case <-deadline:
			t.Fatal("the stream of a stopped mirror did not end within 20 s (keep-alives for ever)")
		}
	}
	code, b := call(t, "GET", s.url+"/v1/info", nil)
	var info httpapi.Info
	if code != 200 || json.Unmarshal(b, &info) != nil || info.Healthy || info.Error == "" {
		t.Fatalf("info of a server whose mirror has stopped: %d %s", code, b)
	}
	for i := 0; i < 20; i++ {
		code, b := call(t, "GET", s.url+"/v1/watch", nil)
		expectError(t, code, b, 503, "unavailable", "")
		if i == 0 {
			var body httpapi.ErrorBody
			json.Unmarshal(b, &body)
			expectStoppedText(t, body)
		}
	}
}

// TestWrongJSONTypesNamed: a body or field of the wrong JSON type is
// answered with the JSON type wanted (object, array, string, integer), not
// with the server's Go type names.
func TestWrongJSONTypesNamed(t *testing.T) {
	s := start(t, httpapi.Options{})
	for _, tc := range []struct {
		method, path, body, want string
	}{
		{"PUT", "/v1/instances", `[]`, "object"},
		{"PUT", "/v1/instances", `"x"`, "object"},
		{"PUT", "/v1/instances", `{"name":"x","capabilities":"storage"}`, "array"},
		{"POST", "/v1/heartbeats", `[]`, "object"},
		{"POST", "/v1/heartbeats", `{"instances":5}`, "array"},
		{"POST", "/v1/heartbeats", `{"instances":[5]}`, "object"},
		{"POST", "/v1/leases/acquire", `{"name":"l","holder":"h","ttl":"1s","token":"x"}`, "integer"},
		{"POST", "/v1/leases/acquire", `[]`, "object"},
	} {
		code, b := call(t, tc.method, s.url+tc.path, tc.body)
		var e httpapi.ErrorBody
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Code != "invalid" ||
			!strings.Contains(e.Error, "JSON "+tc.want) || strings.ContainsAny(e.Error, "[]") || strings.Contains(e.Error, "schema.") || strings.Contains(e.Error, "int64") {
			t.Errorf("%s %s %s: %d %s; want a 400 that asks for a JSON %s", tc.method, tc.path, tc.body, code, b, tc.want)
		}
	}
}

// TestHeartbeatInvalidID: an id no catalog could hold (a space, a NUL,
// too long) in a heartbeat is a 400 naming the item, as the backends'
// ErrInvalid, not reported "missing" (which tells a client to register
// it again). Nothing is renewed.
func TestHeartbeatInvalidID(t *testing.T) {
	s := start(t, httpapi.Options{})
	for _, id := range []string{"has space", "a\x00b", strings.Repeat("x", 300), ""} {
		body, _ := json.Marshal(httpapi.HeartbeatRequest{Instances: []httpapi.HeartbeatItem{{ID: "ok-id"}, {ID: id}}})
		code, b := call(t, "POST", s.url+"/v1/heartbeats", string(body))
		expectError(t, code, b, 400, "invalid", "instances[1].id")
		var e httpapi.ErrorBody
		if json.Unmarshal(b, &e) != nil || e.Reason == "" || !strings.HasPrefix(e.Error, "instances[1].id") {
			t.Fatalf("%q: the body does not carry the field's own error: %s", id, b)
		}
	}
}

// faulty is a catalog whose watches can be told the catalog is unreachable
// (an EventError, as a backend sends when its database goes away) and back.
type faulty struct {
	switchboard.Catalog
	inject chan switchboard.Event
}

func (f *faulty) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	in, err := f.Catalog.Watch(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(chan switchboard.Event)
	go func() {
		defer close(out)
		for {
			var ev switchboard.Event
			select {
			case e, ok := <-in:
				if !ok {
					return
				}
				ev = e
			case ev = <-f.inject:
			case <-ctx.Done():
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestWatchDuringOutageSaysSo: a watch opened (or resumed) while the
// server cannot read its catalog gets the last known set, synced, and then
// an error event — not a synced alone, which told its client the set was
// current. Once the catalog is back, a synced follows.
func TestWatchDuringOutageSaysSo(t *testing.T) {
	cat := &faulty{Catalog: testkit.OpenSQLite(t), inject: make(chan switchboard.Event)}
	s := serveOn(t, cat, httpapi.Options{KeepAlive: 50 * time.Millisecond})
	register(t, s, instanceBody("a"))
	cat.inject <- switchboard.Event{Kind: switchboard.EventError, Err: errors.New("database went away")}
	testkit.WaitUntil(t, "the server to see the outage", func() bool {
		_, b := call(t, "GET", s.url+"/v1/info", nil)
		var info httpapi.Info
		return json.Unmarshal(b, &info) == nil && !info.Healthy
	})
	var lastID string
	for _, resume := range []bool{false, true} {
		var w *sse
		if resume {
			w = watchSSE(t, s.url+"/v1/watch", "Last-Event-ID", lastID)
		} else {
			w = watchSSE(t, s.url+"/v1/watch")
		}
		ev := w.next(t)
		for ; ev.event != "synced"; ev = w.next(t) {
		}
		lastID = ev.id
		if ev := w.next(t); ev.event != "error" || !strings.Contains(ev.raw, "database went away") {
			t.Fatalf("resume=%v: after synced during an outage: %s %s, want the error", resume, ev.event, ev.raw)
		}
		w.cancel()
	}
	w := watchSSE(t, s.url+"/v1/watch", "Last-Event-ID", lastID)
	for ev := w.next(t); ev.event != "synced"; ev = w.next(t) {
	}
	if ev := w.next(t); ev.event != "error" {
		t.Fatalf("resumed during the outage: %s", ev.event)
	}
	cat.inject <- switchboard.Event{Kind: switchboard.EventSynced}
	if ev := w.next(t); ev.event != "synced" {
		t.Fatalf("once the catalog is back: %s %s", ev.event, ev.raw)
	}
}
