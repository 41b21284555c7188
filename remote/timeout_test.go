package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// hangingServer accepts every request and never answers it (headersFirst:
// it sends a 200's headers, then nothing), until the test ends. GET
// /v1/watch is answered by watch when it is not nil.
func hangingServer(t *testing.T, headersFirst bool, watch func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	release := make(chan struct{})
	url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if watch != nil && r.URL.Path == "/v1/watch" {
			watch(w, r)
			return
		}
		if headersFirst {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(`{"id":`)) // and the rest never comes
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // before the server's Close
	return url
}

// within runs f and returns its error, failing the test when f has not
// returned within a minute (a request waiting forever).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer within a minute: the request waits on the silent server", what)
		return nil
	}
}

// TestRequestTimeout: a server that accepted the connection but never
// answers (or sends the headers and never the body) does not hold a caller
// without a deadline forever: past Config.RequestTimeout the request
// fails with an error that says so, names the URL and is ErrUnavailable
// (retryable).
func TestRequestTimeout(t *testing.T) {
	bg := context.Background()
	for _, headersFirst := range []bool{false, true} {
		url := hangingServer(t, headersFirst, nil)
		c := openTest(t, url, Config{RequestTimeout: 200 * time.Millisecond})
		for _, op := range []struct {
			name, path string
			call       func() error
		}{
			{"Get", "/v1/instances/some-id", func() error { _, err := c.Get(bg, "some-id"); return err }},
			{"Register", "/v1/instances", func() error {
				_, err := c.Register(bg, switchboard.Instance{ID: "i-1", Name: "a", Type: "t", Address: "127.0.0.1:1", TTL: time.Minute})
				return err
			}},
			{"Heartbeat", "/v1/heartbeats", func() error { _, err := c.Heartbeat(bg, "i-1"); return err }},
			{"Acquire", "/v1/leases/acquire", func() error { _, err := c.Acquire(bg, "leader", "me", time.Minute); return err }},
		} {
			what := fmt.Sprintf("%s (headers first: %t)", op.name, headersFirst)
			err := within(t, what, op.call)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), url+op.path) ||
				!strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "200ms") {
				t.Errorf("%s: %v; want ErrUnavailable saying the server at %s did not answer within 200ms", what, err, url+op.path)
			}
		}
	}
}

// TestRequestTimeoutLeavesAnEarlierDeadline: a caller's own earlier
// deadline is the caller's error, not the server's silence.
func TestRequestTimeoutLeavesAnEarlierDeadline(t *testing.T) {
	c := openTest(t, hangingServer(t, false, nil), Config{RequestTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := within(t, "Get", func() error { _, err := c.Get(ctx, "some-id"); return err })
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("%v; want the caller's context.DeadlineExceeded", err)
	}
	if c2 := openTest(t, "http://127.0.0.1:1", Config{}); c2.cfg.RequestTimeout != DefaultRequestTimeout {
		t.Fatalf("default RequestTimeout %v, want %v", c2.cfg.RequestTimeout, DefaultRequestTimeout)
	}
}

// TestWatchHeadersTimeout: a watch whose server never sends the response
// headers fails after Config.RequestTimeout (not WatchIdleTimeout), with
// the same error as any other request.
func TestWatchHeadersTimeout(t *testing.T) {
	url := hangingServer(t, false, nil)
	c := openTest(t, url, Config{RequestTimeout: 200 * time.Millisecond, WatchIdleTimeout: time.Hour})
	err := within(t, "Watch", func() error {
		ch, err := c.Watch(context.Background(), switchboard.Query{Name: "a"})
		if err == nil {
			drain(ch)
		}
		return err
	})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), url+"/v1/watch?name=a") || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("%v; want ErrUnavailable saying the server at %s/v1/watch?name=a did not answer", err, url)
	}
}

// TestWatchStreamOutlivesRequestTimeout: RequestTimeout bounds a watch's
// response headers, not its stream: an event that comes long after it is
// delivered, with no error (no reconnection) before it.
func TestWatchStreamOutlivesRequestTimeout(t *testing.T) {
	const rt = 500 * time.Millisecond
	url := hangingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		w.Write([]byte(syncedStream))
		w.(http.Flusher).Flush()
		// Silent for several request timeouts, counted from after the
		// headers went: a request timeout that bounded the stream (its
		// timer starts before the request is sent) would have cut it.
		select {
		case <-time.After(4 * rt):
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("id: e-2\nevent: added\ndata: {\"event\":\"added\",\"instance\":{\"id\":\"late\",\"name\":\"a\",\"ttl\":\"10s\"}}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c := openTest(t, url, Config{RequestTimeout: rt, WatchIdleTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ch <-chan switchboard.Event
	for attempt := 1; ; attempt++ {
		var err error
		ch, err = c.Watch(ctx, switchboard.Query{})
		if err == nil {
			break
		}
		// Headers slower than rt (a loaded machine) fail the watch as
		// they should; that is not what this test is about.
		if !errors.Is(err, ErrUnavailable) || attempt == 20 {
			t.Fatal(err)
		}
	}
	for {
		var ev switchboard.Event
		select {
		case ev = <-ch:
		case <-time.After(time.Minute):
			t.Fatal("no event within a minute")
		}
		switch {
		case ev.Kind == switchboard.EventError:
			t.Fatalf("the stream was cut: %v", ev.Err)
		case ev.Kind == switchboard.EventAdded && ev.Instance.ID == "late":
			return
		}
	}
}
