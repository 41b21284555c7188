package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// srv is a server on a real listener (127.0.0.1:0) over a SQLite file,
// stopped at cleanup.
type srv struct {
	url string
	cat switchboard.Catalog
	api *httpapi.Server
}

func start(t *testing.T, opts httpapi.Options) *srv {
	t.Helper()
	cat := testkit.OpenSQLite(t)
	return serveOn(t, cat, opts)
}

func serveOn(t testing.TB, cat switchboard.Catalog, opts httpapi.Options) *srv {
	t.Helper()
	if opts.DSN == "" {
		opts.DSN = "sqlite:///tmp/test.db"
	}
	if opts.Logger == nil {
		opts.Logger = quietLog()
	}
	api := httpapi.New(cat, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Every exchange is checked against the API's OpenAPI document, after
	// the server has stopped (this cleanup runs last).
	hs := &http.Server{Handler: validated(t, api), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() {
		api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	})
	return &srv{url: "http://" + ln.Addr().String(), cat: cat, api: api}
}

// call does one request and returns the status and body.
func call(t testing.TB, method, url string, body any, hdr ...string) (int, []byte) {
	t.Helper()
	resp := request(t, method, url, body, hdr...)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// request does one request with body (nil, a string, bytes or a value to
// encode as JSON) and headers (name, value, …) and returns the response,
// its body unread (it can be read until the test ends).
func request(t testing.TB, method, url string, body any, hdr ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the header itself is ignored
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sse reads a watch stream in the background.
type sse struct {
	events chan sseEvent
	resp   *http.Response
	cancel context.CancelFunc
}

type sseEvent struct {
	id, event string
	data      map[string]any
	raw       string
}

func watchSSE(t *testing.T, url string, hdr ...string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		t.Fatalf("watch: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	s := &sse{events: make(chan sseEvent, 1024), resp: resp, cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.events <- sseEvent{event: "comment", raw: line}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.raw = line[6:]
				json.Unmarshal([]byte(ev.raw), &ev.data)
			}
		}
	}()
	return s
}

// next returns the next event other than a comment.
func (s *sse) next(t *testing.T) sseEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if ev.event == "comment" {
				continue
			}
			if err := checkEvent(ev.event, ev.raw); err != nil {
				t.Errorf("openapi check: %v", err)
			}
			return ev
		case <-time.After(20 * time.Second):
			t.Fatal("no event within 20 s")
		}
	}
}

func (ev sseEvent) instanceID() string {
	in, _ := ev.data["instance"].(map[string]any)
	id, _ := in["id"].(string)
	return id
}

func expectEvent(t *testing.T, ev sseEvent, kind, reason, id string) {
	t.Helper()
	r, _ := ev.data["reason"].(string)
	if ev.event != kind || ev.data["event"] != kind || r != reason || ev.instanceID() != id {
		t.Fatalf("got event %s %s (data %s), want %s/%s %s", ev.event, ev.id, ev.raw, kind, reason, id)
	}
}

func instanceBody(name string, caps ...string) map[string]any {
	return map[string]any{"name": name, "type": "writer", "address": "127.0.0.1:4317", "capabilities": caps}
}

type registered struct {
	Instance switchboard.Instance `json:"instance"`
	Secret   string               `json:"secret"`
}

func register(t testing.TB, s *srv, body any, hdr ...string) registered {
	t.Helper()
	code, b := call(t, "PUT", s.url+"/v1/instances", body, hdr...)
	if code != 200 {
		t.Fatalf("register: %d %s", code, b)
	}
	var r registered
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// expectDown checks a 503 answer of a catalog (or mirror) that cannot
// serve: its code, want in its error text, and a Retry-After of a few
// seconds for busy alone. It reads and closes resp's body, and returns it
// decoded. what names the request in failures.
func expectDown(t *testing.T, what string, resp *http.Response, code, want string) httpapi.ErrorBody {
	t.Helper()
	var body httpapi.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || body.Code != code || !strings.Contains(body.Error, want) {
		t.Fatalf("%s: %d %+v; want 503 with code %q and the error %q", what, resp.StatusCode, body, code, want)
	}
	busy := code == httpapi.CodeBusy
	ra := resp.Header.Get("Retry-After")
	if n, err := strconv.Atoi(ra); busy != (err == nil && n >= 1 && n <= 10) || (!busy && ra != "") {
		t.Errorf("%s: Retry-After %q; want a few seconds: %v", what, ra, busy)
	}
	return body
}
