package remote

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// syncedStream is a whole (empty) snapshot as the server sends it.
const syncedStream = "retry: 1000\n\nevent: snapshot\ndata: {\"event\":\"snapshot\",\"fresh\":false,\"instances\":0}\n\nid: e-1\nevent: synced\ndata: {\"event\":\"synced\"}\n\n"

// fakeServer answers GET /v1/watch with serve(n, w), n counting the
// connections from 1.
func fakeServer(t *testing.T, serve func(n int, w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(int(n.Add(1)), w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

func openTest(t *testing.T, url string, cfg Config) *Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := Open(context.Background(), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// drain takes a watch's events until it ends.
func drain(ch <-chan switchboard.Event) {
	go func() {
		for range ch {
		}
	}()
}

// TestWatchBackoffGrowsWhileStreamsDropAtOnce: a server (or a proxy in
// front of it) that accepts the stream and drops it at once is retried
// ever more slowly, 100 ms doubling to 2 s, not every 100 ms forever; the
// backoff starts over once a connection has delivered a synced.
func TestWatchBackoffGrowsWhileStreamsDropAtOnce(t *testing.T) {
	url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		if n == 1 || n == 4 {
			w.Write([]byte(syncedStream))
		}
		// Then (or at once) the stream ends.
	})
	c := openTest(t, url, Config{})
	const want = 10
	var mu sync.Mutex
	var pauses []time.Duration
	got := make(chan struct{})
	c.pause = func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		pauses = append(pauses, d)
		if len(pauses) == want {
			close(got)
		}
		n := len(pauses)
		mu.Unlock()
		if n >= want {
			<-ctx.Done()
			return false
		}
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	drain(ch)
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not reconnect 10 times within 20 s")
	}
	ms := time.Millisecond
	expect := []time.Duration{100 * ms, 200 * ms, 400 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(pauses, expect) {
		t.Fatalf("pauses before the reconnections %v, want %v (connections 1 and 4 synced, the others dropped at once)", pauses, expect)
	}
}

// TestWatchRefusesANonEventStream: a 200 that is not text/event-stream (a
// DSN naming another web service, a proxy's login page) is an error that
// says so, not a stream read as empty and reconnected to forever.
func TestWatchRefusesANonEventStream(t *testing.T) {
	url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<html><body>Welcome</body></html>\n"))
	})
	c := openTest(t, url, Config{})
	ch, err := c.Watch(context.Background(), switchboard.Query{})
	if err == nil {
		drain(ch)
		t.Fatal("a text/html answer was taken for a watch stream")
	}
	if !strings.Contains(err.Error(), "text/html") || !strings.Contains(err.Error(), "text/event-stream") {
		t.Fatalf("error %q does not say what came instead of an event stream", err)
	}
}

// TestWatchDropsAnOverlongLine: a stream whose line never ends (not a
// switchboard server's) is dropped once it exceeds maxLine, with an error
// event that says so, instead of being buffered without bound.
func TestWatchDropsAnOverlongLine(t *testing.T) {
	url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		if n > 1 {
			return
		}
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for i := 0; i < maxLine>>20+2; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := openTest(t, url, Config{WatchIdleTimeout: time.Minute})
	c.pause = func(ctx context.Context, d time.Duration) bool { <-ctx.Done(); return false }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Kind != switchboard.EventError || !errors.Is(ev.Err, errLineTooLong) {
			t.Fatalf("got %+v, want an error event for the overlong line", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s: the overlong line is still being buffered")
	}
}

// logRecords keeps the messages logged at Warn and above.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecords) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

// TestWatchReconnectRefusalIsLogged: when the server refuses the
// reconnection (here its token was rotated: 401), the watch goes on
// retrying, and the refusal is logged at warning level, where an operator
// sees why the watch stays down, not only at debug level.
func TestWatchReconnectRefusalIsLogged(t *testing.T) {
	url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			sseHeaders(w)
			w.Write([]byte(syncedStream))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"missing API token","code":"unauthorized"}`))
	})
	logs := &logRecords{}
	c := openTest(t, url, Config{Logger: slog.New(logs)})
	c.pause = func(ctx context.Context, d time.Duration) bool { return ctx.Err() == nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	drain(ch)
	testkit.WaitUntil(t, "a warning for the refused reconnection", func() bool { return logs.has("watch reconnect failed") })
}

// TestErrorWithoutJSONBody: an error answer without the server's JSON body
// (from a proxy in front of it) keeps the meaning of its status: a refused
// token is ErrUnauthorized or ErrForbidden, as from the server itself, not
// an unavailable catalog; a 404 there is no switchboard server, not a
// missing instance.
func TestErrorWithoutJSONBody(t *testing.T) {
	for _, tc := range []struct {
		status int
		is     error
		not    error
	}{
		{http.StatusUnauthorized, ErrUnauthorized, ErrUnavailable},
		{http.StatusForbidden, ErrForbidden, ErrUnavailable},
		{http.StatusRequestEntityTooLarge, switchboard.ErrInvalid, ErrUnavailable},
		{http.StatusNotFound, ErrUnavailable, switchboard.ErrNotFound},
		{http.StatusBadGateway, ErrUnavailable, switchboard.ErrInvalid},
	} {
		url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(tc.status)
			w.Write([]byte("<html>proxy says no</html>"))
		})
		c := openTest(t, url, Config{})
		_, err := c.Get(context.Background(), "some-id")
		if !errors.Is(err, tc.is) || errors.Is(err, tc.not) || !strings.Contains(err.Error(), "proxy says no") {
			t.Errorf("HTTP %d without a JSON body: %v; want errors.Is %v and not %v", tc.status, err, tc.is, tc.not)
		}
	}
}
