package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
)

// logBuf collects a server's JSON log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log lines whose msg is msg, decoded.
func (l *logBuf) lines(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func auditLog(opts *httpapi.Options) *logBuf {
	lb := &logBuf{}
	opts.Logger = slog.New(slog.NewJSONHandler(lb, nil))
	return lb
}

const (
	clientToken = "client-token-0123456789"
	adminToken  = "admin-token-0123456789"
)

var (
	asClient = []string{"Authorization", "Bearer " + clientToken}
	asAdmin  = []string{"Authorization", "Bearer " + adminToken}
)

// TestReapNeedsAdmin: with the shared client token, a reap by an age
// below twice the longest TTL (which would delete live rows) is refused
// and deletes nothing; a default reap and one by an age past every TTL
// are allowed; the admin token reaps by any age. Each reap, and each
// refusal, is an audit line.
func TestReapNeedsAdmin(t *testing.T) {
	opts := httpapi.Options{Token: clientToken, AdminToken: adminToken, ReapInterval: -1}
	lb := auditLog(&opts)
	s := start(t, opts)
	for _, name := range []string{"a", "b"} {
		body := instanceBody(name)
		body["ttl"] = "10s"
		register(t, s, body, asClient...)
	}
	code, b := call(t, "POST", s.url+"/v1/reap?older_than=1us", nil, asClient...)
	expectError(t, code, b, 403, "forbidden", "")
	if !strings.Contains(string(b), "admin token") {
		t.Errorf("the refusal does not say what is needed: %s", b)
	}
	if n := len(listAll(t, s)); n != 2 {
		t.Fatalf("a reap with the client token deleted live rows: %d left of 2", n)
	}
	if code, b := call(t, "POST", s.url+"/v1/reap", nil, asClient...); code != 200 || !strings.Contains(string(b), `"reaped":0`) {
		t.Fatalf("default reap with the client token: %d %s", code, b)
	}
	if code, b := call(t, "POST", s.url+"/v1/reap?older_than=20s", nil, asClient...); code != 200 || !strings.Contains(string(b), `"reaped":0`) {
		t.Fatalf("reap past twice every TTL with the client token: %d %s", code, b)
	}
	if n := len(lb.lines("audit: reap refused")); n != 1 {
		t.Errorf("%d audit lines for the refused reap; want 1", n)
	}
	if code, b := call(t, "POST", s.url+"/v1/reap?older_than=1us", nil, asAdmin...); code != 200 || !strings.Contains(string(b), `"reaped":2`) {
		t.Fatalf("reap with the admin token: %d %s", code, b)
	}
	got := lb.lines("audit: reap")
	if len(got) == 0 || got[len(got)-1]["role"] != "admin" || got[len(got)-1]["rows"] != float64(2) {
		t.Fatalf("audit lines of the reaps: %v", got)
	}

	// Without an admin token, nobody reaps live rows, and the refusal
	// says which key to set.
	s2 := start(t, httpapi.Options{Token: clientToken, ReapInterval: -1})
	register(t, s2, instanceBody("c"), asClient...)
	code, b = call(t, "POST", s2.url+"/v1/reap?older_than=1us", nil, asClient...)
	expectError(t, code, b, 403, "forbidden", "")
	if !strings.Contains(string(b), "http.admin_token") || len(listAll(t, s2)) != 1 {
		t.Fatalf("reap on a server without an admin token: %s, %d rows", b, len(listAll(t, s2)))
	}
}

// TestAdminDeletesOthersRows: a client cannot delete another's row
// without its secret; the admin token can, and it is audited.
func TestAdminDeletesOthersRows(t *testing.T) {
	opts := httpapi.Options{Token: clientToken, AdminToken: adminToken, ReapInterval: -1}
	lb := auditLog(&opts)
	s := start(t, opts)
	r := register(t, s, instanceBody("a"), asClient...)
	code, b := call(t, "DELETE", s.url+"/v1/instances/"+r.Instance.ID, nil, asClient...)
	expectError(t, code, b, 401, "unauthorized", "")
	if len(lb.lines("audit: credential refused")) != 1 {
		t.Errorf("no audit line for the refused secret")
	}
	if code, b := call(t, "DELETE", s.url+"/v1/instances/"+r.Instance.ID, nil, asAdmin...); code != 204 {
		t.Fatalf("admin delete: %d %s", code, b)
	}
	if len(listAll(t, s)) != 0 || len(lb.lines("audit: instance deleted by another party")) != 1 {
		t.Fatalf("admin delete: %d rows left, audit %v", len(listAll(t, s)), lb.lines("audit: instance deleted by another party"))
	}
	// A wrong token is refused, and audited.
	code, b = call(t, "GET", s.url+"/v1/instances", nil, "Authorization", "Bearer nope")
	expectError(t, code, b, 403, "forbidden", "")
	if n := len(lb.lines("audit: credential refused")); n != 2 {
		t.Errorf("%d credential audit lines; want 2", n)
	}
}

// TestForeignHostRefused: a server without a token answers IP addresses,
// localhost and its allowed hosts, and refuses any other Host (a page
// whose name was rebound to 127.0.0.1) with 403; with a token it answers
// every Host.
func TestForeignHostRefused(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1, AllowedHosts: []string{"sb.internal"}})
	register(t, s, instanceBody("a"))
	port := s.url[strings.LastIndex(s.url, ":"):]
	for host, want := range map[string]int{
		"evil.example" + port: 403, "evil.example": 403, "127.0.0.1.nip.io" + port: 403,
		"localhost" + port: 200, "LOCALHOST.": 200, "app.localhost" + port: 200, "127.0.0.1" + port: 200,
		"[::1]" + port: 200, "10.1.2.3": 200, "sb.internal" + port: 200,
	} {
		for _, req := range []struct{ method, path string }{{"GET", "/v1/instances"}, {"POST", "/v1/reap?older_than=1us"}, {"GET", "/"}} {
			code, b := call(t, req.method, s.url+req.path, nil, "Host", host)
			if want == 403 {
				expectError(t, code, b, 403, "forbidden", "")
			} else if code == 403 {
				t.Errorf("%s %s with Host %s: %d %s", req.method, req.path, host, code, b)
			}
		}
	}
	tok := start(t, httpapi.Options{Token: clientToken, ReapInterval: -1})
	if code, b := call(t, "GET", tok.url+"/v1/instances", nil, append([]string{"Host", "evil.example"}, asClient...)...); code != 200 {
		t.Fatalf("a server with a token refused a Host: %d %s", code, b)
	}
}

// TestCrossOriginWritesRefused: a browser's cross-site POST (a form, or a
// no-cors fetch) changes nothing: refused by its Sec-Fetch-Site or Origin;
// a body that is not application/json is refused with 415 whatever its
// origin.
func TestCrossOriginWritesRefused(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	body := instanceBody("a")
	body["ttl"] = "10s"
	register(t, s, body)
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"},
		{"Origin", "http://evil.example"},
		{"Sec-Fetch-Site", "same-site", "Origin", "http://a.localhost"},
	} {
		code, b := call(t, "POST", s.url+"/v1/reap?older_than=1us", nil, hdr...)
		expectError(t, code, b, 403, "forbidden", "")
		code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l","holder":"evil","ttl":"1h"}`, append(hdr, "Content-Type", "text/plain")...)
		expectError(t, code, b, 403, "forbidden", "")
	}
	code, b := call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l","holder":"evil","ttl":"1h"}`, "Content-Type", "text/plain;charset=UTF-8")
	expectError(t, code, b, 415, httpapi.CodeUnsupportedMedia, "")
	code, b = call(t, "POST", s.url+"/v1/reap?older_than=1us", "", "Content-Type", "application/x-www-form-urlencoded")
	expectError(t, code, b, 415, httpapi.CodeUnsupportedMedia, "")
	// A typeless body is a program's, unless a browser sent it (a fetch of
	// a Blob): then it is refused too.
	code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l","holder":"evil","ttl":"1h"}`,
		"Content-Type", "", "Sec-Fetch-Site", "same-origin")
	expectError(t, code, b, 415, httpapi.CodeUnsupportedMedia, "")
	if n := len(listAll(t, s)); n != 1 {
		t.Fatalf("cross-origin writes deleted rows: %d left", n)
	}
	if code, b := call(t, "GET", s.url+"/v1/leases", nil); code != 200 || string(b) != "[]\n" {
		t.Fatalf("cross-origin writes took a lease: %d %s", code, b)
	}
	// The same requests from the same origin pass.
	if code, b := call(t, "POST", s.url+"/v1/reap?older_than=1h", nil, "Sec-Fetch-Site", "same-origin", "Origin", s.url); code != 200 {
		t.Fatalf("same-origin reap: %d %s", code, b)
	}
}

// TestLeaseTheftRefused: a lease taken through the API with a secret (in
// the X-Lease-Secret header here) is its holder's alone: another client
// (with the same API token) cannot acquire it as its holder, renew it or
// release it with the token it read from the list, and errors name
// neither holder nor token. The owner's renewal still works; a TTL past
// max_lease_ttl is refused; the admin token releases any lease, audited.
func TestLeaseTheftRefused(t *testing.T) {
	opts := httpapi.Options{Token: clientToken, AdminToken: adminToken, ReapInterval: -1}
	lb := auditLog(&opts)
	s := start(t, opts)
	const ownSecret = "the-owner-s-own-secret-0123456789"
	code, b := call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"lock","holder":"pod-owner","ttl":"1m"}`,
		append([]string{httpapi.LeaseSecretHeader, ownSecret}, asClient...)...)
	var l httpapi.LeaseJSON
	if code != 200 || json.Unmarshal(b, &l) != nil || l.Holder != "pod-owner" || l.Secret != ownSecret {
		t.Fatalf("acquire: %d %s", code, b)
	}
	code, b = call(t, "GET", s.url+"/v1/leases", nil, asClient...)
	if code != 200 || strings.Contains(string(b), l.Secret) || strings.Contains(string(b), `\u001f`) || strings.Contains(string(b), "s1$") {
		t.Fatalf("the list shows the secret or its hash: %s", b)
	}
	var listed []httpapi.LeaseJSON
	json.Unmarshal(b, &listed)
	steal := map[string]any{"name": "lock", "holder": "pod-owner", "token": listed[0].Token, "ttl": "1h"}
	for _, tc := range []struct {
		op, code string
		body     map[string]any
	}{
		{"acquire", "lease_held", steal},
		{"renew", "lease_lost", steal},
		{"release", "lease_lost", steal},
		{"renew", "lease_lost", with(steal, "secret", "a-guessed-secret-0000")},
		{"release", "lease_lost", with(steal, "holder", "pod-thief")},
	} {
		code, b := call(t, "POST", s.url+"/v1/leases/"+tc.op, tc.body, asClient...)
		expectError(t, code, b, 409, tc.code, "")
		if strings.Contains(string(b), "pod-owner") || strings.Contains(string(b), "token "+jsonNum(listed[0].Token)) {
			t.Errorf("%s: the error names the holder or token: %s", tc.op, b)
		}
	}
	if n := len(lb.lines("audit: lease steal refused")); n < 3 {
		t.Errorf("%d audit lines for the steal attempts; want at least 3", n)
	}
	// The TTL the thief asked for is refused anyway.
	code, b = call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"other","holder":"x","ttl":"2562047h"}`, asClient...)
	expectError(t, code, b, 400, "invalid", "ttl")
	// The owner renews, and its lease is its own.
	own := map[string]any{"name": "lock", "holder": "pod-owner", "token": l.Token, "ttl": "1m", "secret": l.Secret}
	if code, b := call(t, "POST", s.url+"/v1/leases/renew", own, asClient...); code != 200 {
		t.Fatalf("the owner's renewal: %d %s", code, b)
	}
	if code, b := call(t, "POST", s.url+"/v1/leases/acquire", own, asClient...); code != 200 || !strings.Contains(string(b), `"token":`+jsonNum(l.Token)) {
		t.Fatalf("the owner's re-acquisition with its secret: %d %s", code, b)
	}
	// The admin releases it without the secret.
	if code, b := call(t, "POST", s.url+"/v1/leases/release", map[string]any{"name": "lock", "holder": "admin"}, asAdmin...); code != 204 {
		t.Fatalf("admin release: %d %s", code, b)
	}
	rel := lb.lines("audit: lease released")
	if len(rel) != 1 || rel[0]["by_admin"] != true {
		t.Fatalf("audit of the admin release: %v", rel)
	}
}

// TestLeaseSecretIssued: an acquire that sends no secret gets one issued
// in the answer, and renewing or releasing the lease without it is
// refused as a theft would be (a client of a release from before lease
// secrets, which never sends one back, therefore cannot keep a lease
// through this server); with it, the holder renews and releases.
func TestLeaseSecretIssued(t *testing.T) {
	s := start(t, httpapi.Options{Token: clientToken, ReapInterval: -1})
	code, b := call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"lock","holder":"pod-a","token":0,"ttl":"1m"}`, asClient...)
	var l httpapi.LeaseJSON
	if code != 200 || json.Unmarshal(b, &l) != nil || l.Holder != "pod-a" || len(l.Secret) < 32 {
		t.Fatalf("acquire without a secret: %d %s; want the lease with an issued secret", code, b)
	}
	held := map[string]any{"name": "lock", "holder": "pod-a", "token": l.Token, "ttl": "1m"}
	for _, op := range []string{"renew", "release"} {
		if code, b := call(t, "POST", s.url+"/v1/leases/"+op, held, asClient...); code != 409 {
			t.Fatalf("%s without the issued secret: %d %s; want 409", op, code, b)
		}
	}
	if code, b := call(t, "POST", s.url+"/v1/leases/renew", with(held, "secret", l.Secret), asClient...); code != 200 {
		t.Fatalf("renew with the issued secret: %d %s", code, b)
	}
	if code, b := call(t, "POST", s.url+"/v1/leases/release", with(held, "secret", l.Secret), asClient...); code != 204 {
		t.Fatalf("release with the issued secret: %d %s", code, b)
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestLegacySecretStillAuthenticates: a row stored by an earlier release
// holds its secret's bare SHA-256; its owner still renews and deletes it
// with the secret, and a wrong one is still refused.
func TestLegacySecretStillAuthenticates(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	const secret = "an-old-secret-from-before-0001"
	sum := sha256.Sum256([]byte(secret))
	if _, err := s.cat.Register(context.Background(), switchboard.Instance{ID: "old-1", Name: "old", Type: "t", Address: "127.0.0.1:1",
		TTL: time.Minute, Metadata: map[string]string{"switchboard.secret-sha256": hex.EncodeToString(sum[:])}}); err != nil {
		t.Fatal(err)
	}
	code, b := call(t, "PUT", s.url+"/v1/instances/old-1/heartbeat", nil, httpapi.SecretHeader, "not-the-old-secret-000")
	expectError(t, code, b, 403, "forbidden", "")
	if code, b := call(t, "PUT", s.url+"/v1/instances/old-1/heartbeat", nil, httpapi.SecretHeader, secret); code != 204 {
		t.Fatalf("heartbeat with the old secret: %d %s", code, b)
	}
	if code, b := call(t, "DELETE", s.url+"/v1/instances/old-1", nil, httpapi.SecretHeader, secret); code != 204 {
		t.Fatalf("delete with the old secret: %d %s", code, b)
	}
}

// TestQuotas: registrations of new ids past MaxInstances and watch
// streams past the per-client limit are answered 429 with Retry-After;
// re-registering an existing id is not a new row and passes.
func TestQuotas(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1, MaxInstances: 2, MaxWatchersPerClient: 2, MaxLeases: 1})
	a := register(t, s, instanceBody("a"))
	register(t, s, instanceBody("b"))
	resp := request(t, "PUT", s.url+"/v1/instances", instanceBody("c"))
	var body httpapi.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || body.Code != httpapi.CodeTooMany || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third registration over a quota of 2: %d %+v Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	again := instanceBody("a")
	again["id"] = a.Instance.ID
	register(t, s, again, httpapi.SecretHeader, a.Secret)
	if n := len(listAll(t, s)); n != 2 {
		t.Fatalf("%d rows; want 2", n)
	}
	watchSSE(t, s.url+"/v1/watch")
	watchSSE(t, s.url+"/v1/watch")
	resp = request(t, "GET", s.url+"/v1/watch", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third watch of one client over a limit of 2: %d", resp.StatusCode)
	}
	if code, b := call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l1","holder":"h","ttl":"1m"}`); code != 200 {
		t.Fatalf("first lease: %d %s", code, b)
	}
	code, b := call(t, "POST", s.url+"/v1/leases/acquire", `{"name":"l2","holder":"h","ttl":"1m"}`)
	expectError(t, code, b, 429, httpapi.CodeTooMany, "")
}

// TestLeasesPaged: GET /v1/leases answers a page at a time, with the
// name the next page starts after.
func TestLeasesPaged(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	for _, n := range []string{"a", "b", "c"} {
		if code, b := call(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": n, "holder": "h", "ttl": "1m"}); code != 200 {
			t.Fatalf("acquire %s: %d %s", n, code, b)
		}
	}
	var names []string
	after := ""
	for range 4 {
		resp := request(t, "GET", s.url+"/v1/leases?limit=2"+map[bool]string{true: "&after=" + after}[after != ""], nil)
		var page []httpapi.LeaseJSON
		json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		for _, l := range page {
			names = append(names, l.Name)
		}
		if after = resp.Header.Get(httpapi.LeaseNextHeader); after == "" {
			break
		}
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("pages: %v", names)
	}
	code, b := call(t, "GET", s.url+"/v1/leases?limit=5000", nil)
	expectError(t, code, b, 400, "invalid", "limit")
}

// TestInstanceBytesQuota: distinct large registrations stop with 429
// once the instances the server holds reach MaxInstanceBytes; the rows
// registered before stay, and nothing past the limit is stored.
func TestInstanceBytesQuota(t *testing.T) {
	const limit = 3 << 20
	s := start(t, httpapi.Options{ReapInterval: -1, MaxInstanceBytes: limit})
	stored := 0
	for i := range 20 {
		resp := request(t, "PUT", s.url+"/v1/instances", largeBody("big-"+jsonNum(int64(i)), i))
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			break
		}
		if resp.StatusCode != 200 {
			t.Fatalf("registration %d: %d", i, resp.StatusCode)
		}
		stored++
		testkit_WaitFeed(t, s, stored) // the mirror counts what it holds
	}
	if stored == 0 || stored >= 20 {
		t.Fatalf("%d large registrations stored under a limit of 3 MiB; want some, then 429", stored)
	}
	if n := len(listAll(t, s)); n != stored {
		t.Fatalf("%d rows; want the %d stored before the limit", n, stored)
	}
}

// TestIdenticalReregistrationIsNoChange: registering a row again, as it
// is, with its secret stores the secret's hash as it was (no new salt), so
// the row does not change and watchers see no update.
func TestIdenticalReregistrationIsNoChange(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1})
	body := instanceBody("same")
	body["id"] = "same-1"
	r := register(t, s, body)
	before := listAll(t, s)[0].Metadata["switchboard.secret-sha256"]
	register(t, s, body, httpapi.SecretHeader, r.Secret)
	if after := listAll(t, s)[0].Metadata["switchboard.secret-sha256"]; after != before {
		t.Fatalf("an identical re-registration stored a new hash: %q, was %q", after, before)
	}
}
