package httpapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// listAll returns every row straight from the catalog, secret hashes
// included: what is stored.
func listAll(t *testing.T, s *srv) []switchboard.Instance {
	t.Helper()
	all, err := s.cat.List(context.Background(), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func TestRegisterSecretsAndOwnership(t *testing.T) {
	s := start(t, httpapi.Options{})
	body := instanceBody("owned", "storage")
	body["id"] = "w-1"
	r := register(t, s, body)
	if r.Instance.ID != "w-1" || len(r.Secret) < 32 {
		t.Fatalf("register: %+v", r)
	}
	// Stored hashed with a salt of its own: the row holds a salted
	// SHA-256, never the secret.
	stored := listAll(t, s)[0]
	if h := stored.Metadata["switchboard.secret-sha256"]; !strings.HasPrefix(h, "s1$") || len(h) < 60 || strings.Contains(h, r.Secret) {
		t.Fatalf("stored secret: %v", stored.Metadata)
	}
	for _, url := range []string{"/v1/instances", "/v1/instances/w-1", "/v1/instances?all=true"} {
		if _, b := call(t, "GET", s.url+url, nil); strings.Contains(string(b), "secret") || strings.Contains(string(b), r.Secret) {
			t.Fatalf("%s shows the secret or its hash: %s", url, b)
		}
	}

	// Re-registering, heartbeating or deleting someone else's id: 401
	// without the secret, 403 with a wrong one; nothing changes.
	hijack := instanceBody("hijack", "storage")
	hijack["id"] = "w-1"
	code, b := call(t, "PUT", s.url+"/v1/instances", hijack)
	expectError(t, code, b, 401, "unauthorized", "")
	code, b = call(t, "PUT", s.url+"/v1/instances", hijack, httpapi.SecretHeader, "not-the-secret-at-all")
	expectError(t, code, b, 403, "forbidden", "")
	code, b = call(t, "PUT", s.url+"/v1/instances/w-1/heartbeat", nil)
	expectError(t, code, b, 401, "unauthorized", "")
	code, b = call(t, "PUT", s.url+"/v1/instances/w-1/heartbeat", nil, httpapi.SecretHeader, "not-the-secret-at-all")
	expectError(t, code, b, 403, "forbidden", "")
	code, b = call(t, "POST", s.url+"/v1/heartbeats", `{"instances":[{"id":"w-1","secret":"not-the-secret-at-all"},{"id":"w-1"}]}`)
	var refused httpapi.HeartbeatResponse
	if code != 200 || json.Unmarshal(b, &refused) != nil || len(refused.Refused) != 2 ||
		refused.Refused[0].Code != "forbidden" || refused.Refused[1].Code != "unauthorized" || len(refused.Missing) != 0 {
		t.Fatalf("batch heartbeat with a wrong and no secret: %d %s", code, b)
	}
	code, b = call(t, "DELETE", s.url+"/v1/instances/w-1", nil)
	expectError(t, code, b, 401, "unauthorized", "")
	code, b = call(t, "DELETE", s.url+"/v1/instances/w-1", nil, httpapi.SecretHeader, "not-the-secret-at-all")
	expectError(t, code, b, 403, "forbidden", "")
	if strings.Contains(string(b), "not-the-secret") {
		t.Fatalf("error echoes the secret: %s", b)
	}
	if got := listAll(t, s); len(got) != 1 || got[0].Name != "owned" || !got[0].LastSeen.Equal(stored.LastSeen) {
		t.Fatalf("a refused request changed the row: %+v", got)
	}

	// With the secret: heartbeat renews, re-register updates and keeps it.
	time.Sleep(5 * time.Millisecond)
	if code, b := call(t, "PUT", s.url+"/v1/instances/w-1/heartbeat", nil, httpapi.SecretHeader, r.Secret); code != 204 {
		t.Fatalf("heartbeat: %d %s", code, b)
	}
	if got := listAll(t, s)[0]; !got.LastSeen.After(stored.LastSeen) {
		t.Fatalf("heartbeat did not renew: %v -> %v", stored.LastSeen, got.LastSeen)
	}
	body["version"] = "2"
	r2 := register(t, s, body, httpapi.SecretHeader, r.Secret)
	if r2.Secret != r.Secret || r2.Instance.Version != "2" {
		t.Fatalf("re-register: %+v", r2)
	}
	code, b = call(t, "POST", s.url+"/v1/heartbeats", map[string]any{"instances": []map[string]string{
		{"id": "w-1", "secret": r.Secret}, {"id": "ghost"}}})
	var hr httpapi.HeartbeatResponse
	if code != 200 || json.Unmarshal(b, &hr) != nil || len(hr.Missing) != 1 || hr.Missing[0] != "ghost" {
		t.Fatalf("batch heartbeat: %d %s", code, b)
	}
	if code, b := call(t, "DELETE", s.url+"/v1/instances/w-1", nil, httpapi.SecretHeader, r.Secret); code != 204 {
		t.Fatalf("deregister: %d %s", code, b)
	}
	code, b = call(t, "DELETE", s.url+"/v1/instances/w-1", nil, httpapi.SecretHeader, r.Secret)
	expectError(t, code, b, 404, "not_found", "")
	code, b = call(t, "PUT", s.url+"/v1/instances/w-1/heartbeat", nil, httpapi.SecretHeader, r.Secret)
	expectError(t, code, b, 404, "not_found", "")

	// The id is free again: anyone may take it, with a new secret.
	r3 := register(t, s, hijack)
	if r3.Secret == r.Secret || r3.Instance.Name != "hijack" {
		t.Fatalf("free id: %+v", r3)
	}
	// A client may bring its own secret (a re-registration after a reap).
	own := instanceBody("own")
	own["id"] = "own-1"
	r4 := register(t, s, own, httpapi.SecretHeader, "my-own-secret-0123456789")
	if r4.Secret != "my-own-secret-0123456789" {
		t.Fatalf("own secret not kept: %+v", r4)
	}
	code, b = call(t, "PUT", s.url+"/v1/instances", own, httpapi.SecretHeader, "short")
	expectError(t, code, b, 400, "invalid", httpapi.SecretHeader)

	// A row registered directly on the backend has no secret.
	direct, err := s.cat.Register(context.Background(), switchboard.Instance{Name: "direct", Type: "t", Address: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if code, b := call(t, "PUT", s.url+"/v1/instances/"+direct.ID+"/heartbeat", nil); code != 204 {
		t.Fatalf("heartbeat of a direct row: %d %s", code, b)
	}
}

func TestBadRequests(t *testing.T) {
	s := start(t, httpapi.Options{})
	good := register(t, s, instanceBody("keep", "a"))
	before := listAll(t, s)
	big := `{"name":"x","type":"t","address":"127.0.0.1:1","version":"` + strings.Repeat("v", httpapi.MaxBody) + `"}`
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		field      string
	}{
		{"not JSON", `{`, 400, "invalid", ""},
		{"array", `[]`, 400, "invalid", ""},
		{"null", `null`, 400, "invalid", ""},
		{"trailing data", `{"name":"x","type":"t","address":"127.0.0.1:1"} {}`, 400, "invalid", ""},
		{"unknown field", `{"name":"x","type":"t","address":"127.0.0.1:1","adress":"typo"}`, 400, "invalid", "adress"},
		{"wrong type", `{"name":"x","type":"t","address":"127.0.0.1:1","capabilities":"storage"}`, 400, "invalid", "capabilities"},
		{"bad ttl", `{"name":"x","type":"t","address":"127.0.0.1:1","ttl":"soon"}`, 400, "invalid", ""},
		{"bad name", `{"name":"__","type":"t","address":"127.0.0.1:1"}`, 400, "invalid_name", "name"},
		{"bad address", `{"name":"x","type":"t","address":"localhost"}`, 400, "invalid_address", "address"},
		{"bad capability", `{"name":"x","type":"t","address":"127.0.0.1:1","capabilities":["a b"]}`, 400, "invalid", "capability"},
		{"bad id", `{"id":"has space","name":"x","type":"t","address":"127.0.0.1:1"}`, 400, "invalid", "id"},
		{"reserved metadata", `{"name":"x","type":"t","address":"127.0.0.1:1","metadata":{"switchboard.secret-sha256":"x"}}`, 400, "invalid", "metadata"},
		{"too large", big, 413, "too_large", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := call(t, "PUT", s.url+"/v1/instances", tc.body)
			var e httpapi.ErrorBody
			json.Unmarshal(b, &e)
			if code != tc.status || e.Code != tc.code || (tc.field != "" && e.Field != tc.field) || e.Error == "" {
				t.Fatalf("got %d %s, want %d %s field %q", code, b, tc.status, tc.code, tc.field)
			}
		})
	}
	code, b := call(t, "POST", s.url+"/v1/heartbeats", `{"instances":[{"id":""}]}`)
	expectError(t, code, b, 400, "invalid", "instances[0].id")
	code, b = call(t, "POST", s.url+"/v1/heartbeats", `{"ids":["x"]}`)
	expectError(t, code, b, 400, "invalid", "ids")
	code, b = call(t, "POST", s.url+"/v1/reap?older_than=soon", nil)
	expectError(t, code, b, 400, "invalid", "older_than")
	code, b = call(t, "POST", s.url+"/v1/reap?reachable_for=-1s", nil)
	expectError(t, code, b, 400, "invalid", "reachable_for")
	code, b = call(t, "POST", s.url+"/v1/reap?older_than=1h&reachable_for=1s", nil)
	expectError(t, code, b, 400, "invalid", "reachable_for")
	code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l","holder":"h","ttl":"forever"}`)
	expectError(t, code, b, 400, "invalid", "ttl")
	code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l","holder":"h","ttl":"0s"}`)
	expectError(t, code, b, 400, "invalid", "")
	after := listAll(t, s)
	if len(after) != 1 || after[0].ID != good.Instance.ID || !after[0].LastSeen.Equal(before[0].LastSeen) {
		t.Fatalf("bad requests changed what is stored: %+v", after)
	}
}

func TestReapNowAndLeases(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	short := instanceBody("short")
	short["ttl"] = "100ms"
	register(t, s, short)
	// Stale for twice its TTL (a lower bound: it cannot flake), but a
	// client connected for less than the row's TTL does not reap it.
	time.Sleep(300 * time.Millisecond)
	code, b := call(t, "POST", s.url+"/v1/reap?reachable_for=50ms", nil)
	if code != 200 || string(b) != "{\"reaped\":0}\n" {
		t.Fatalf("reap inside the caller's grace: %d %s", code, b)
	}
	testkit.WaitUntil(t, "reap at 2×TTL", func() bool {
		code, b := call(t, "POST", s.url+"/v1/reap?reachable_for=1s", nil)
		return code == 200 && string(b) == "{\"reaped\":1}\n"
	})
	code, b = call(t, "GET", s.url+"/v1/now", nil)
	var now httpapi.NowResponse
	if code != 200 || json.Unmarshal(b, &now) != nil || time.Since(now.Now).Abs() > time.Minute {
		t.Fatalf("now: %d %s", code, b)
	}

	code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"compactor-lock","holder":"pod-a","ttl":"1m"}`)
	var l httpapi.LeaseJSON
	if code != 200 || json.Unmarshal(b, &l) != nil || l.Holder != "pod-a" || !l.Held || l.Token < 1 {
		t.Fatalf("acquire: %d %s", code, b)
	}
	code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"compactor-lock","holder":"pod-b","ttl":"1m"}`)
	expectError(t, code, b, 409, "lease_held", "")
	renew := map[string]any{"name": "compactor-lock", "holder": "pod-a", "token": l.Token, "ttl": "2m", "secret": l.Secret}
	code, b = call(t, "POST", s.url+"/v1/leases/renew", renew)
	var r httpapi.LeaseJSON
	if code != 200 || json.Unmarshal(b, &r) != nil || r.TTL != "2m0s" || r.Token != l.Token || !r.ExpiresAt.After(l.ExpiresAt) {
		t.Fatalf("renew: %d %s", code, b)
	}
	stale := map[string]any{"name": "compactor-lock", "holder": "pod-a", "token": l.Token + 1, "secret": l.Secret}
	code, b = call(t, "POST", s.url+"/v1/leases/renew", stale)
	expectError(t, code, b, 409, "lease_lost", "")
	if code, b := call(t, "POST", s.url+"/v1/leases/release", renew); code != 204 {
		t.Fatalf("release: %d %s", code, b)
	}
	code, b = call(t, "POST", s.url+"/v1/leases/release", stale)
	expectError(t, code, b, 409, "lease_lost", "")
	code, b = call(t, "GET", s.url+"/v1/leases", nil)
	var ls []httpapi.LeaseJSON
	if code != 200 || json.Unmarshal(b, &ls) != nil || len(ls) != 1 || ls[0].Held || ls[0].Holder != "" {
		t.Fatalf("leases after release: %d %s", code, b)
	}
}

func TestToken(t *testing.T) {
	s := start(t, httpapi.Options{Token: "t0ken"})
	for _, path := range []string{"/v1/instances", "/v1/watch", "/v1/leases", "/v1/info", "/metrics"} {
		code, b := call(t, "GET", s.url+path, nil)
		expectError(t, code, b, 401, "unauthorized", "")
		code, b = call(t, "GET", s.url+path, nil, "Authorization", "Bearer nope")
		expectError(t, code, b, 403, "forbidden", "")
		code, b = call(t, "GET", s.url+path, nil, "Authorization", "Basic dDBrZW4=")
		expectError(t, code, b, 401, "unauthorized", "")
	}
	code, b := call(t, "PUT", s.url+"/v1/instances", instanceBody("x"))
	expectError(t, code, b, 401, "unauthorized", "")
	if n := len(listAll(t, s)); n != 0 {
		t.Fatalf("an unauthorised register wrote %d rows", n)
	}
	if code, b := call(t, "GET", s.url+"/v1/instances", nil, "Authorization", "Bearer t0ken"); code != 200 {
		t.Fatalf("with the token: %d %s", code, b)
	}
	if code, _ := call(t, "GET", s.url+"/healthz", nil); code != 200 {
		t.Fatalf("healthz needs no token: %d", code)
	}
	w := watchSSE(t, s.url+"/v1/watch", "Authorization", "Bearer t0ken")
	if ev := w.next(t); ev.event != "snapshot" {
		t.Fatal(ev)
	}
}

// TestTLS serves the API over TLS with a certificate made here.
func TestTLS(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	api := httpapi.New(cat, httpapi.Options{Logger: quietLog()})
	t.Cleanup(func() { api.Close() })
	ts := httptest.NewUnstartedServer(validated(t, api))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS() // a certificate generated for 127.0.0.1 by the test server
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get(ts.URL + "/v1/instances")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("over TLS: %d %v", resp.StatusCode, resp.TLS)
	}
	if _, err := http.Get(ts.URL + "/v1/instances"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate accepted: %v", err)
	}
}

// TestHeartbeatsBatched: heartbeats from 20 clients arriving within the
// window are renewed in one catalog call (one statement), not 20.
func TestHeartbeatsBatched(t *testing.T) {
	s := start(t, httpapi.Options{HeartbeatWindow: 3 * time.Second})
	const clients = 20
	regs := make([]registered, clients)
	for i := range regs {
		regs[i] = register(t, s, instanceBody(fmt.Sprintf("c%d", i)))
	}
	before := metricValue(t, s, "switchboard_http_heartbeat_batches_total")
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i, r := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = call(t, "PUT", s.url+"/v1/instances/"+r.Instance.ID+"/heartbeat", nil, httpapi.SecretHeader, r.Secret)
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 204 {
			t.Fatalf("heartbeat %d: %d", i, c)
		}
	}
	// All 20 arrive well within 3 s on any machine; allow one split.
	if n := metricValue(t, s, "switchboard_http_heartbeat_batches_total") - before; n < 1 || n > 2 {
		t.Fatalf("%d heartbeats took %v catalog calls, want 1 (2 at most)", clients, n)
	}
	if n := metricValue(t, s, "switchboard_http_heartbeats_total"); n != clients {
		t.Fatalf("heartbeats counted: %v", n)
	}
}

func metricValue(t *testing.T, s *srv, name string) float64 {
	t.Helper()
	_, b := call(t, "GET", s.url+"/metrics", nil)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metric %s missing", name)
	return 0
}

// TestServerReaper: the server deletes rows stale for twice their TTL by
// itself.
func TestServerReaper(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: 50 * time.Millisecond})
	short := instanceBody("short")
	short["ttl"] = "100ms"
	register(t, s, short)
	long := register(t, s, instanceBody("long"))
	testkit.WaitUntil(t, "the server's reaper", func() bool {
		all := listAll(t, s)
		return len(all) == 1 && all[0].ID == long.Instance.ID
	})
	// A reap request's answer says that this server reaps by itself, and
	// how often (without a reaper it says nothing: TestReapNowAndLeases).
	code, b := call(t, "POST", s.url+"/v1/reap?reachable_for=1s", nil)
	var r httpapi.ReapResponse
	if code != 200 || json.Unmarshal(b, &r) != nil || r.ReapsEvery != "50ms" {
		t.Fatalf("reap on a server that reaps: %d %s", code, b)
	}
}

// TestExpiredRegistrationCanBeTakenOver: once a row has expired (its owner
// stopped heartbeating), a new client may register the id without the old
// secret; the old secret no longer works. A live row stays protected.
func TestExpiredRegistrationCanBeTakenOver(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	body := instanceBody("restarting")
	body["id"] = "fixed-id"
	body["ttl"] = "2s"
	old := register(t, s, body)
	code, b := call(t, "PUT", s.url+"/v1/instances", body)
	if code == 200 {
		// On a slow machine the row may already have expired; then the
		// takeover below is what happened here.
		t.Logf("row expired before the live check: %s", b)
	} else {
		expectError(t, code, b, 401, "unauthorized", "")
	}
	testkit.WaitUntil(t, "the row to expire", func() bool {
		all := listAll(t, s)
		return len(all) == 1 && all[0].Stale
	})
	testkit.WaitUntil(t, "the server's mirror to see it expired", func() bool {
		var info httpapi.Info
		_, b := call(t, "GET", s.url+"/v1/info", nil)
		json.Unmarshal(b, &info)
		return info.Instances.Stale == 1
	})
	body["ttl"] = "1m"
	taken := register(t, s, body)
	if taken.Secret == old.Secret || taken.Instance.ID != "fixed-id" {
		t.Fatalf("takeover: %+v", taken)
	}
	code, b = call(t, "PUT", s.url+"/v1/instances/fixed-id/heartbeat", nil, httpapi.SecretHeader, old.Secret)
	expectError(t, code, b, 403, "forbidden", "")
	if code, b := call(t, "PUT", s.url+"/v1/instances/fixed-id/heartbeat", nil, httpapi.SecretHeader, taken.Secret); code != 204 {
		t.Fatalf("new owner's heartbeat: %d %s", code, b)
	}
}
