package remote

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// listServer answers heartbeats (renewing everything) and /v1/info, with
// the status and health a test sets, and counts the heartbeats it took.
type listServer struct {
	*httptest.Server
	status     atomic.Int32 // of every answer; 0: 200
	unhealthy  atomic.Bool
	heartbeats atomic.Int32
}

func newListServer(t *testing.T, ln net.Listener) *listServer {
	t.Helper()
	f := &listServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if st := int(f.status.Load()); st != 0 {
			w.WriteHeader(st)
			json.NewEncoder(w).Encode(schema.ErrorBody{Error: "told to fail", Code: statusCode(st)})
			return
		}
		switch r.URL.Path {
		case "/v1/heartbeats":
			f.heartbeats.Add(1)
			json.NewEncoder(w).Encode(schema.HeartbeatResponse{})
		case "/v1/info":
			info := schema.Info{Healthy: !f.unhealthy.Load()}
			if !info.Healthy {
				info.Error = "catalog unreachable"
			}
			json.NewEncoder(w).Encode(info)
		default:
			http.NotFound(w, r)
		}
	})
	if ln == nil {
		f.Server = httptest.NewServer(h)
	} else {
		f.Server = httptest.NewUnstartedServer(h)
		f.Listener.Close()
		f.Listener = ln
		f.Start()
	}
	t.Cleanup(f.Close)
	return f
}

func (f *listServer) addr() string { return strings.TrimPrefix(f.URL, "http://") }

func openList(t *testing.T, dsn string) *Client {
	t.Helper()
	c, err := Open(context.Background(), dsn, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFailoverMovesOn: a server that cannot be reached or answers 5xx is
// left for the next within the same request, which then stays there; a 4xx
// is the answer, which every server would give.
func TestFailoverMovesOn(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := strings.TrimPrefix(down.URL, "http://")
	down.Close()
	failing, ok := newListServer(t, nil), newListServer(t, nil)
	failing.status.Store(http.StatusServiceUnavailable)
	c := openList(t, "http://"+downAddr+","+failing.addr()+","+ok.addr())
	if got := c.Servers(); len(got) != 3 || got[0] != "http://"+downAddr {
		t.Fatalf("servers %q", got)
	}
	if _, err := c.Heartbeat(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got := c.Server(); got != ok.URL {
		t.Fatalf("after a refused connection and a 503 the client is on %s, want %s", got, ok.URL)
	}
	if _, err := c.Heartbeat(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if n := ok.heartbeats.Load(); n != 2 {
		t.Fatalf("the working server took %d heartbeats, want 2", n)
	}

	// A 403 is an answer: the client does not move on.
	ok.status.Store(http.StatusForbidden)
	failing.status.Store(0)
	_, err := c.Heartbeat(context.Background(), "a")
	if !errors.Is(err, ErrForbidden) {
		t.Fatalf("err %v, want ErrForbidden", err)
	}
	if got := c.Server(); got != ok.URL {
		t.Fatalf("a 403 moved the client to %s", got)
	}

	// Every server failing: the last error, and the next request tries
	// them again (the one that recovered first).
	ok.status.Store(http.StatusBadGateway)
	failing.status.Store(http.StatusInternalServerError)
	if _, err := c.Heartbeat(context.Background(), "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("every server failing: err %v, want ErrUnavailable", err)
	}
	failing.status.Store(0)
	if _, err := c.Heartbeat(context.Background(), "a"); err != nil {
		t.Fatalf("a server recovered, but: %v", err)
	}
	if got := c.Server(); got != failing.URL {
		t.Fatalf("on %s, want the recovered %s", got, failing.URL)
	}
}

// TestFailoverUnhealthyInfo: WatchStats leaves a server whose /v1/info
// says it is unhealthy for a healthy one, and names it.
func TestFailoverUnhealthyInfo(t *testing.T) {
	sick, well := newListServer(t, nil), newListServer(t, nil)
	sick.unhealthy.Store(true)
	c := openList(t, "http://"+sick.addr()+","+well.addr())
	st := c.WatchStats()
	if !st.Healthy || st.Server != well.URL {
		t.Fatalf("stats %+v, want healthy from %s", st, well.URL)
	}
	if c.Server() != well.URL {
		t.Fatalf("requests go to %s after an unhealthy answer", c.Server())
	}
	// Alone, an unhealthy server is reported as it is.
	single := openList(t, sick.URL)
	if st := single.WatchStats(); st.Healthy || st.Server != sick.URL || st.LastError == nil {
		t.Fatalf("stats %+v, want unhealthy from %s", st, sick.URL)
	}
}

// TestFailoverOneNameSeveralAddresses: a host name that resolves to two
// addresses is two servers; when the first stops, requests go to the
// second, through the same name.
func TestFailoverOneNameSeveralAddresses(t *testing.T) {
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln1.Addr().String())
	ln2, err := net.Listen("tcp", "127.0.0.2:"+port)
	if err != nil {
		ln1.Close()
		t.Skipf("no second loopback address here: %v", err)
	}
	first, second := newListServer(t, ln1), newListServer(t, ln2)
	lookupHost = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1", "127.0.0.2"}, nil }
	t.Cleanup(func() { lookupHost = net.DefaultResolver.LookupHost })

	c := openList(t, "http://servers.example:"+port)
	want := []string{
		"http://servers.example:" + port + " (127.0.0.1:" + port + ")",
		"http://servers.example:" + port + " (127.0.0.2:" + port + ")",
	}
	if got := c.Servers(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("servers %q, want %q", got, want)
	}
	if _, err := c.Heartbeat(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if _, err := c.Heartbeat(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if first.heartbeats.Load() != 1 || second.heartbeats.Load() != 1 || c.Server() != want[1] {
		t.Fatalf("heartbeats %d and %d, on %s", first.heartbeats.Load(), second.heartbeats.Load(), c.Server())
	}
}

// TestServerListDSN: every server of a list is checked, and a bad one is
// named, through Open and switchboard.ParseDSN alike.
func TestServerListDSN(t *testing.T) {
	for _, ok := range []string{
		"http://h1:7400,h2:7400,h3:7400",
		"https://h1,h2:8443/prefix",
		"http://[::1]:7400,127.0.0.1:7400",
	} {
		if _, err := switchboard.ParseDSN(ok); err != nil {
			t.Errorf("ParseDSN(%q): %v", ok, err)
		}
		c, err := Open(context.Background(), ok, Config{})
		if err != nil {
			t.Errorf("Open(%q): %v", ok, err)
			continue
		}
		c.Close()
	}
	for dsn, named := range map[string]string{
		"http://h1:7400,,h2:7400":     "server 2 of the list is empty",
		"http://h1:7400,h2:99999":     `"h2:99999"`,
		"http://h1:7400,:7400":        `":7400"`,
		"http://h1:7400,u@h2:7400":    `"u@h2:7400"`,
		"https://h1:7400,h2:x/prefix": `"h2:x"`,
		"http://h1,h2:7400/p?x=1":     `"h1"`,
	} {
		_, perr := switchboard.ParseDSN(dsn)
		_, oerr := Open(context.Background(), dsn, Config{})
		for _, err := range []error{perr, oerr} {
			if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), named) {
				t.Errorf("%q: %v, want an invalid DSN naming %s", dsn, err, named)
			}
		}
	}
}

// TestFailoverSilentServer: a server that takes the request and never
// answers gets half the time the caller left, and the next server the
// rest: a heartbeat bounded by its interval still renews.
func TestFailoverSilentServer(t *testing.T) {
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(release) })
	ok := newListServer(t, nil)
	c := openList(t, "http://"+strings.TrimPrefix(silent.URL, "http://")+","+ok.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if _, err := c.Heartbeat(ctx, "a"); err != nil {
		t.Fatalf("a silent first server cost the heartbeat: %v", err)
	}
	if c.Server() != ok.URL || ok.heartbeats.Load() != 1 {
		t.Fatalf("on %s, %d heartbeats on the working server", c.Server(), ok.heartbeats.Load())
	}
}
