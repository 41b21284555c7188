package dashboard_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-io/switchboard/dashboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// stallInfo counts the page's requests and holds every /v1/info request
// until the client gives up on it or release is called.
type stallInfo struct {
	next     http.Handler
	release  chan struct{}
	mu       sync.Mutex
	inFlight int // /v1/info requests being held
	maxIn    int // the most held at once
	infos    int // /v1/info requests received
	lists    int // /v1/instances requests received since the first /v1/info
}

func (s *stallInfo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/info":
		s.mu.Lock()
		s.infos++
		s.inFlight++
		s.maxIn = max(s.maxIn, s.inFlight)
		s.mu.Unlock()
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return
		}
	case strings.HasPrefix(r.URL.Path, "/v1/instances") && r.Method == http.MethodGet:
		s.mu.Lock()
		if s.infos > 0 {
			s.lists++
		}
		s.mu.Unlock()
	}
	s.next.ServeHTTP(w, r)
}

// waitGo polls cond until it holds; the 60 s bound catches what never
// happens on a loaded machine and says nothing about speed.
func waitGo(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *stallInfo) counts() (maxIn, infos, lists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn, s.infos, s.lists
}

// TestDashboardPollsDoNotPileUp: a server that takes /v1/info and never
// answers. The page polls it every 2 s and after every sync; it must hold
// at most one such request at a time (not one more every 2 s, each a
// pending fetch in the page and a connection of the browser's six per
// host), abandon it after its timeout, try again, and show the header once
// the server answers.
func TestDashboardPollsDoNotPileUp(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	api := httpapi.New(cat, httpapi.Options{DSN: "sqlite:///var/lib/switchboard/catalog.db", UI: dashboard.Handler(), Logger: slog.New(slog.DiscardHandler)})
	stall := &stallInfo{next: api, release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: stall, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	var once sync.Once
	release := func() { once.Do(func() { close(stall.release) }) }
	t.Cleanup(func() {
		release()
		api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	})
	url := "http://" + ln.Addr().String()
	s := &server{t: t, addr: ln.Addr().String()}
	s.register(map[string]any{"id": "api-1", "name": "api", "type": "router", "address": "127.0.0.1:9001", "ttl": "1m"})

	ctx := browser(t)
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = chromedp.Do(nctx, chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.ID("rows")))
	cancel()
	if err != nil {
		t.Fatalf("open the page: %v", err)
	}
	waitJS(t, ctx, "the stream to be live", `document.getElementById("conn").dataset.state === "live"`)
	// The heartbeat poll (every 2 s while live) is the clock: after three
	// of them the header poll has come due several times.
	waitGo(t, "three heartbeat polls while /v1/info hangs", func() bool {
		_, _, lists := stall.counts()
		return lists >= 3
	})
	if maxIn, infos, _ := stall.counts(); maxIn > 1 {
		t.Fatalf("the page held %d /v1/info requests at once (%d sent) against a server that does not answer; want at most 1", maxIn, infos)
	}
	// The hung request is abandoned after its timeout and tried again.
	waitGo(t, "a new /v1/info request after the page gave up on the first", func() bool {
		_, infos, _ := stall.counts()
		return infos >= 2
	})
	release()
	waitJS(t, ctx, "the header once the server answers", `document.getElementById("backend").textContent === "sqlite"`)
	if maxIn, infos, _ := stall.counts(); maxIn > 1 {
		t.Fatalf("the page held %d /v1/info requests at once (%d sent); want at most 1", maxIn, infos)
	}
}
