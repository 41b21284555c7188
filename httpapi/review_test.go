package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestUnknownQueryParameters: a misspelt filter (capabilities= for
// capability=) is refused with the parameter named, not ignored with every
// instance listed; so is a parameter given twice (only one would count) and
// a malformed query string. The same holds for the watch and the reap.
func TestUnknownQueryParameters(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	register(t, s, instanceBody("a", "storage"))
	register(t, s, instanceBody("b"))
	for _, tc := range []struct {
		method, path, field string
	}{
		{"GET", "/v1/instances?capabilities=storage", "capabilities"},
		{"GET", "/v1/instances?Name=a", "Name"},
		{"GET", "/v1/instances?name=a&name=b", "name"},
		{"GET", "/v1/instances?name=%zz", ""},
		{"GET", "/v1/watch?capabilities=storage", "capabilities"},
		{"GET", "/v1/watch?last_event_id=x&last_event_id=y", "last_event_id"},
		{"POST", "/v1/reap?older=1h", "older"},
		{"POST", "/v1/reap?older_than=1h&older_than=-1s", "older_than"},
	} {
		code, b := call(t, tc.method, s.url+tc.path, nil)
		expectError(t, code, b, 400, "invalid", tc.field)
		if tc.field != "" && !strings.Contains(string(b), tc.field) {
			t.Fatalf("%s %s: the error does not name %q: %s", tc.method, tc.path, tc.field, b)
		}
	}
	// What the endpoints take still works.
	code, b := call(t, "GET", s.url+"/v1/instances?capability=storage&all=false&name=a&type=writer", nil)
	var list []map[string]any
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list) != 1 {
		t.Fatalf("filtered list: %d %s", code, b)
	}
	if code, b := call(t, "POST", s.url+"/v1/reap?older_than=1h", nil); code != 200 {
		t.Fatalf("reap: %d %s", code, b)
	}
	w := watchSSE(t, s.url+"/v1/watch?capability=storage&last_event_id=other-1")
	if ev := w.next(t); ev.event != "snapshot" || ev.data["fresh"] != true {
		t.Fatalf("watch with filters and last_event_id: %s %s", ev.event, ev.raw)
	}
}

// TestWatchEmptyLastEventID: an empty last event id is none: the
// "?lastEventId=" an EventSource polyfill sends on its first connection,
// an empty last_event_id or an empty Last-Event-ID header each get a plain
// snapshot, not a 400 (nor a fresh one). lastEventId with an id resumes
// as last_event_id and the header do; given with a different
// last_event_id, it is refused with the parameter named.
func TestWatchEmptyLastEventID(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	a := register(t, s, instanceBody("a", "storage"))
	var synced string
	for _, tc := range []struct {
		query string
		hdr   []string
	}{
		{"?lastEventId=", nil},
		{"?capability=storage&lastEventId=", nil},
		{"?last_event_id=", nil},
		{"?last_event_id=&lastEventId=", nil},
		{"", []string{"Last-Event-ID", ""}},
		{"?lastEventId=", []string{"Last-Event-ID", ""}},
	} {
		what := fmt.Sprintf("watch%s with headers %q", tc.query, tc.hdr)
		w := watchSSE(t, s.url+"/v1/watch"+tc.query, tc.hdr...)
		if ev := w.next(t); ev.event != "snapshot" || ev.data["fresh"] != false {
			t.Fatalf("%s: %s %s; want a snapshot not marked fresh", what, ev.event, ev.raw)
		}
		expectEvent(t, w.next(t), "added", "", a.Instance.ID)
		ev := w.next(t)
		if ev.event != "synced" || ev.id == "" {
			t.Fatalf("%s: %s %s; want synced with an id", what, ev.event, ev.raw)
		}
		synced = ev.id
		w.cancel()
	}

	// The polyfill's name with an id resumes from it.
	b := register(t, s, instanceBody("b", "storage"))
	r := watchSSE(t, s.url+"/v1/watch?lastEventId="+url.QueryEscape(synced))
	expectEvent(t, r.next(t), "added", "", b.Instance.ID)
	if ev := r.next(t); ev.event != "synced" || ev.id == "" {
		t.Fatalf("resumed with lastEventId: %s %s; want synced after the replay", ev.event, ev.raw)
	}
	code, body := call(t, "GET", s.url+"/v1/watch?last_event_id="+url.QueryEscape(synced)+"&lastEventId=other-1", nil)
	expectError(t, code, body, 400, "invalid", "lastEventId")
}

// TestBearerSchemeCaseInsensitive: the authentication scheme is
// case-insensitive (RFC 9110 §11.1), so "bearer TOKEN" is the token, not a
// missing one; a wrong token is still refused.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	s := start(t, httpapi.Options{Token: "t0ken"})
	for _, h := range []string{"bearer t0ken", "BEARER t0ken", "Bearer  t0ken"} {
		if code, b := call(t, "GET", s.url+"/v1/instances", nil, "Authorization", h); code != 200 {
			t.Fatalf("Authorization: %s: %d %s", h, code, b)
		}
	}
	code, b := call(t, "GET", s.url+"/v1/instances", nil, "Authorization", "bearer nope")
	expectError(t, code, b, 403, "forbidden", "")
	code, b = call(t, "GET", s.url+"/v1/instances", nil, "Authorization", "bearer")
	expectError(t, code, b, 401, "unauthorized", "")
	code, b = call(t, "GET", s.url+"/v1/instances", nil, "Authorization", "Bearertoken t0ken")
	expectError(t, code, b, 401, "unauthorized", "")
}

// TestEmptyBody: a request without its body says the body is empty, not
// "malformed JSON body: EOF".
func TestEmptyBody(t *testing.T) {
	s := start(t, httpapi.Options{})
	for _, tc := range []struct{ method, path string }{
		{"PUT", "/v1/instances"}, {"POST", "/v1/heartbeats"}, {"POST", "/v1/leases/acquire"},
	} {
		for _, body := range []any{nil, " \n"} {
			code, b := call(t, tc.method, s.url+tc.path, body)
			expectError(t, code, b, 400, "invalid", "")
			if !strings.Contains(string(b), "empty body") {
				t.Fatalf("%s %s with an empty body: %s", tc.method, tc.path, b)
			}
		}
	}
}

// TestSlowBody: a client that sends its body slower than BodyTimeout (here
// never finishes it) is answered 400 and disconnected, instead of holding
// its connection and a handler for ever (the server cannot set an
// http.Server ReadTimeout, which would end the SSE streams). A body sent
// in time is then handled with no deadline left on the connection.
func TestSlowBody(t *testing.T) {
	s := start(t, httpapi.Options{BodyTimeout: time.Second})
	u, _ := url.Parse(s.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /v1/instances HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"name\":", u.Host)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a body that never ends: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	expectError(t, resp.StatusCode, b, 400, "invalid", "")
	if !strings.Contains(string(b), "not received within 1s") {
		t.Fatalf("the error does not say the body timed out: %s", b)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open after the body timed out")
	}
	// The deadline does not outlive the body: a request whose handling
	// outlasts BodyTimeout once its body is in (the heartbeat batch window
	// holds it 2 s) is answered.
	s2 := start(t, httpapi.Options{BodyTimeout: 500 * time.Millisecond, HeartbeatWindow: 2 * time.Second})
	r := register(t, s2, instanceBody("a"))
	body := fmt.Sprintf(`{"instances":[{"id":%q,"secret":%q}]}`, r.Instance.ID, r.Secret)
	code, b := call(t, "POST", s2.url+"/v1/heartbeats", body)
	if code != 200 || strings.Contains(string(b), r.Instance.ID) {
		t.Fatalf("heartbeat held past BodyTimeout: %d %s", code, b)
	}
}

// FuzzQuery sends arbitrary query strings and Last-Event-ID headers to the
// endpoints that parse them (list, watch, reap): never a panic, never a
// 5xx, and every error a JSON body with a code.
func FuzzQuery(f *testing.F) {
	for _, s := range []struct{ route, query, last string }{
		{"list", "name=My_Service&all=true", ""},
		{"list", "capability=a b", ""},
		{"list", "capabilities=x", ""},
		{"list", "name=%zz", ""},
		{"list", "all=maybe&all=true", ""},
		{"watch", "capability=storage", "deadbeef-3"},
		{"watch", "last_event_id=x-99999999999999999999", ""},
		{"watch", "", "-1"},
		{"reap", "older_than=1h", ""},
		{"reap", "reachable_for=-1s", ""},
		{"reap", "older_than=9223372036854775807ns&reachable_for=1s", ""},
	} {
		f.Add(s.route, s.query, s.last)
	}
	cat := testkit.OpenSQLite(f)
	api := httpapi.New(cat, httpapi.Options{Logger: quietLog(), ReapInterval: -1})
	f.Cleanup(func() { api.Close() })
	f.Fuzz(func(t *testing.T, route, query, last string) {
		method, path := "GET", "/v1/instances"
		switch route {
		case "watch":
			path = "/v1/watch"
		case "reap":
			method, path = "POST", "/v1/reap"
		}
		req, err := http.NewRequest(method, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.RawQuery = query
		if last != "" && !strings.ContainsAny(last, "\r\n") {
			req.Header.Set("Last-Event-ID", last)
		}
		// A watch that is answered streams until its request ends: end it
		// before it starts, so the handler writes its snapshot and returns.
		ctx, cancel := context.WithCancel(context.Background())
		if route == "watch" {
			cancel()
		}
		defer cancel()
		rec := httptest.NewRecorder()
		validated(t, api).ServeHTTP(rec, req.WithContext(ctx))
		switch {
		case rec.Code == 200:
			return
		case rec.Code == 503 && route == "watch":
			return // the request ended while it waited for the mirror
		case rec.Code >= 500:
			t.Fatalf("%s %q: status %d %s", route, query, rec.Code, rec.Body)
		}
		var e httpapi.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Code == "" {
			t.Fatalf("%s %q: %d with a body that is not a JSON error: %s", route, query, rec.Code, rec.Body)
		}
	})
}

// TestHealthzMetricsMethodNotAllowed: /healthz and /metrics answer another
// method with the API's JSON 405 and Allow, with and without a UI at /
// (which would otherwise answer for them).
func TestHealthzMetricsMethodNotAllowed(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>ui</html>")) })
	for _, opts := range []httpapi.Options{{}, {UI: ui}} {
		s := start(t, opts)
		for _, path := range []string{"/healthz", "/metrics"} {
			req, _ := http.NewRequest("POST", s.url+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			expectError(t, resp.StatusCode, b, 405, "method_not_allowed", "")
			if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
				t.Fatalf("POST %s: Allow %q", path, allow)
			}
		}
		if code, b := call(t, "GET", s.url+"/healthz", nil); code != 200 {
			t.Fatalf("GET /healthz: %d %s", code, b)
		}
	}
}

// TestHeadWatch: HEAD /v1/watch answers the stream's headers and ends,
// rather than streaming into a response without a body until the client
// goes away; a client that reuses the connection (the HEAD's answer is
// complete) is answered on it.
func TestHeadWatch(t *testing.T) {
	s := start(t, httpapi.Options{})
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	resp, err := hc.Head(s.url + "/v1/watch")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("HEAD /v1/watch: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, err = hc.Get(s.url + "/v1/now")
	if err != nil {
		t.Fatalf("the request after HEAD /v1/watch, on its connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/now after HEAD /v1/watch: %d", resp.StatusCode)
	}
	testkit.WaitUntil(t, "no open stream", func() bool { return metricValue(t, s, "switchboard_http_sse_subscribers") == 0 })
}

// TestStuckListReader: a client that asks for a list larger than the
// socket buffers and never reads it is disconnected once the answer has
// been stuck for WriteTimeout, instead of holding its handler (and the
// encoded list) for ever.
func TestStuckListReader(t *testing.T) {
	s := start(t, httpapi.Options{WriteTimeout: time.Second, ReapInterval: -1})
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 250<<10) + `"}`)
	for i := 0; i < 40; i++ {
		if _, err := s.cat.Register(context.Background(), switchboard.Instance{Name: fmt.Sprintf("big-%d", i), Type: "t",
			Address: "127.0.0.1:1", TTL: time.Hour, Components: big}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/instances HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	testkit.WaitUntil(t, "the list handler to give up on its stuck reader", func() bool {
		_, b := call(t, "GET", s.url+"/metrics", nil)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "switchboard_http_requests_total{") && strings.Contains(line, `route="list"`) {
				return true
			}
		}
		return false
	})
}
