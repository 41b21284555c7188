package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
)

const (
	tokenA     = "token-of-tenant-a-0123456789"
	tokenB     = "token-of-tenant-b-0123456789"
	tokenAdmin = "token-of-the-admin-0123456789"
)

// bearer is the header carrying tok (none for "").
func bearer(tok string) []string {
	if tok == "" {
		return nil
	}
	return []string{"Authorization", "Bearer " + tok}
}

// expectQuota checks a 429 of quota with its limit: Retry-After of a few
// seconds, the quota named in the body and in its text (want).
func expectQuota(t *testing.T, what string, resp *http.Response, quota string, limit int64, want string) {
	t.Helper()
	var body httpapi.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || body.Code != httpapi.CodeTooMany || body.Quota != quota || body.Limit != limit ||
		!strings.Contains(body.Error, want) || !strings.Contains(body.Error, "http."+quota) {
		t.Fatalf("%s: %d %+v; want 429 too_many_requests of quota %s (limit %d) saying %q", what, resp.StatusCode, body, quota, limit, want)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Fatalf("%s: Retry-After %q; want seconds", what, resp.Header.Get("Retry-After"))
	}
}

// openFile opens the SQLite catalog at path (closed at cleanup, and by
// the test when it restarts the server).
func openFile(t *testing.T, path string) switchboard.Catalog {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), "sqlite://"+path, switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

func tokenOpts() httpapi.Options {
	return httpapi.Options{ReapInterval: -1, Token: tokenA, Tokens: []string{tokenB}, AdminToken: tokenAdmin}
}

// TestInstanceQuotaPerToken: token A at its quota of live instances gets
// 429 with Retry-After naming the quota while token B still registers and
// the admin is exempt; re-registering A's own row is no new row; after A
// deregisters one, or one of its rows expires, A registers again; the
// count survives a restart of the server on the same database (it is
// stored with the rows, as a tag, never the token); the tag shows in no
// answer.
func TestInstanceQuotaPerToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	cat := openFile(t, path)
	opts := tokenOpts()
	opts.MaxInstancesPerToken = 2
	s := serveOn(t, cat, opts)

	a1 := register(t, s, instanceBody("a1"), bearer(tokenA)...)
	a2 := register(t, s, instanceBody("a2"), bearer(tokenA)...)
	resp := request(t, "PUT", s.url+"/v1/instances", instanceBody("a3"), bearer(tokenA)...)
	expectQuota(t, "A's third instance", resp, "max_instances_per_token", 2, "this token owns 2 live instances")
	// The same with an id of A's choosing: a new id is a new row.
	withID := instanceBody("a3")
	withID["id"] = "a-3"
	resp = request(t, "PUT", s.url+"/v1/instances", withID, bearer(tokenA)...)
	expectQuota(t, "A's third instance with an id", resp, "max_instances_per_token", 2, "this token")

	// B has a quota of its own; the admin has none.
	register(t, s, instanceBody("b1"), bearer(tokenB)...)
	register(t, s, instanceBody("b2"), bearer(tokenB)...)
	for i := range 3 {
		register(t, s, instanceBody("admin"+strconv.Itoa(i)), bearer(tokenAdmin)...)
	}

	// A's own live row registered again is no new row.
	again := instanceBody("a1", "more")
	again["id"] = a1.Instance.ID
	register(t, s, again, append(bearer(tokenA), httpapi.SecretHeader, a1.Secret)...)

	// The catalog holds the owner's tag in the secret's stored form,
	// never the token; the API shows neither.
	code, b := call(t, "GET", s.url+"/v1/instances/"+a1.Instance.ID, nil, bearer(tokenA)...)
	if code != 200 || strings.Contains(string(b), "switchboard.") {
		t.Fatalf("get: %d %s", code, b)
	}
	tags := map[string]bool{}
	for _, in := range listAll(t, s) {
		if len(in.Metadata) != 1 {
			t.Fatalf("row %s: metadata %v; want the secret's key alone", in.ID, in.Metadata)
		}
		stored := in.Metadata["switchboard.secret-sha256"]
		tag := httpapi.OwnerTag(stored)
		if strings.Contains(stored, "token-of") {
			t.Fatalf("row %s stores a token: %q", in.ID, stored)
		}
		if strings.HasPrefix(in.Name, "admin") != (tag == "") {
			t.Fatalf("row %s (%s): owner tag %q; want one for a client's row, none for the admin's", in.ID, in.Name, tag)
		}
		tags[tag] = true
	}
	if len(tags) != 3 { // A's, B's, none
		t.Fatalf("owner tags %v; want A's, B's and none", tags)
	}

	// After A deregisters one, A registers again, up to the quota.
	if code, b := call(t, "DELETE", s.url+"/v1/instances/"+a2.Instance.ID, nil, append(bearer(tokenA), httpapi.SecretHeader, a2.Secret)...); code != 204 {
		t.Fatalf("deregister: %d %s", code, b)
	}
	a4 := register(t, s, instanceBody("a4"), bearer(tokenA)...)
	resp = request(t, "PUT", s.url+"/v1/instances", instanceBody("a5"), bearer(tokenA)...)
	expectQuota(t, "A at its quota again", resp, "max_instances_per_token", 2, "this token owns 2")

	// A restart on the same database: the new server counts A's rows
	// from what is stored.
	s.api.Close()
	cat.Close()
	cat = openFile(t, path)
	s = serveOn(t, cat, opts)
	resp = request(t, "PUT", s.url+"/v1/instances", instanceBody("a5"), bearer(tokenA)...)
	expectQuota(t, "A at its quota after a restart", resp, "max_instances_per_token", 2, "this token owns 2")
	resp = request(t, "PUT", s.url+"/v1/instances", instanceBody("b3"), bearer(tokenB)...)
	expectQuota(t, "B past its quota after a restart", resp, "max_instances_per_token", 2, "this token owns 2")

	// A row of A's that expires (its owner stopped heartbeating) counts
	// no more: A registers again once the server has seen it expire.
	if code, b := call(t, "DELETE", s.url+"/v1/instances/"+a4.Instance.ID, nil, bearer(tokenAdmin)...); code != 204 {
		t.Fatalf("admin deletes a4: %d %s", code, b)
	}
	short := instanceBody("short")
	short["ttl"] = "1s"
	register(t, s, short, bearer(tokenA)...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := request(t, "PUT", s.url+"/v1/instances", instanceBody("after-expiry"), bearer(tokenA)...)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("registering after A's short-lived row expired: %d (waited for it until %s)", resp.StatusCode, deadline.Format(time.TimeOnly))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// acquire takes lease name as holder with tok; it returns the status, the
// body and the lease's secret.
func acquire(t *testing.T, s *srv, tok, name, holder string) (int, []byte, string) {
	t.Helper()
	code, b := call(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": name, "holder": holder, "ttl": "1m"}, bearer(tok)...)
	var l httpapi.LeaseJSON
	json.Unmarshal(b, &l)
	return code, b, l.Secret
}

// TestLeaseQuotaPerToken: token A holding its quota of leases gets 429
// naming the quota for a new term, while its own leases still renew and
// re-acquire, token B takes leases and the admin is exempt; after A
// releases one, A takes another; the count is read from the catalog, so
// a restarted server on the same database counts the same; a holder too
// long to carry the credential's tag is refused rather than uncounted.
func TestLeaseQuotaPerToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	cat := openFile(t, path)
	opts := tokenOpts()
	opts.MaxLeasesPerToken = 2
	s := serveOn(t, cat, opts)

	_, _, sec1 := acquire(t, s, tokenA, "l1", "a")
	if code, b, _ := acquire(t, s, tokenA, "l2", "a"); code != 200 {
		t.Fatalf("A's second lease: %d %s", code, b)
	}
	resp := request(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": "l3", "holder": "a", "ttl": "1m"}, bearer(tokenA)...)
	expectQuota(t, "A's third lease", resp, "max_leases_per_token", 2, "this token holds 2 leases")

	for _, l := range []string{"l3", "l4"} {
		if code, b, _ := acquire(t, s, tokenB, l, "b"); code != 200 {
			t.Fatalf("B's lease %s: %d %s", l, code, b)
		}
	}
	for _, l := range []string{"m1", "m2", "m3"} {
		if code, b, _ := acquire(t, s, tokenAdmin, l, "admin"); code != 200 {
			t.Fatalf("the admin's lease %s: %d %s", l, code, b)
		}
	}
	// A's own lease: acquiring it again, and renewing it, is no new lease.
	code, b := call(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": "l1", "holder": "a", "ttl": "1m", "secret": sec1}, bearer(tokenA)...)
	if code != 200 {
		t.Fatalf("A acquires its own lease again: %d %s", code, b)
	}
	var l1 httpapi.LeaseJSON
	json.Unmarshal(b, &l1)
	if code, b := call(t, "POST", s.url+"/v1/leases/renew", map[string]any{"name": "l1", "holder": "a", "token": l1.Token, "ttl": "1m", "secret": sec1}, bearer(tokenA)...); code != 200 {
		t.Fatalf("A renews its lease: %d %s", code, b)
	}
	// The list shows neither secret nor tag.
	code, b = call(t, "GET", s.url+"/v1/leases", nil, bearer(tokenB)...)
	if code != 200 || strings.Contains(string(b), "s1$") || strings.Contains(string(b), "\\u001f") {
		t.Fatalf("leases: %d %s", code, b)
	}

	// A restart: the new server reads what A holds from the catalog.
	s.api.Close()
	cat.Close()
	cat = openFile(t, path)
	s = serveOn(t, cat, opts)
	resp = request(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": "l5", "holder": "a", "ttl": "1m"}, bearer(tokenA)...)
	expectQuota(t, "A's third lease after a restart", resp, "max_leases_per_token", 2, "this token holds 2 leases")

	// Released, a lease counts no more.
	if code, b := call(t, "POST", s.url+"/v1/leases/release", map[string]any{"name": "l1", "holder": "a", "token": l1.Token, "secret": sec1}, bearer(tokenA)...); code != 204 {
		t.Fatalf("A releases l1: %d %s", code, b)
	}
	if code, b, _ := acquire(t, s, tokenA, "l5", "a"); code != 200 {
		t.Fatalf("A's lease after releasing one: %d %s", code, b)
	}
	resp = request(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": "l6", "holder": "a", "ttl": "1m"}, bearer(tokenA)...)
	expectQuota(t, "A at its quota again", resp, "max_leases_per_token", 2, "this token holds 2")

	// A holder leaving no room for the tag would escape the count.
	code, b, _ = acquire(t, s, tokenB, "long", strings.Repeat("h", 950))
	expectError(t, code, b, 400, httpapi.CodeInvalid, "holder")
	if !strings.Contains(string(b), "at most 921") {
		t.Fatalf("long holder: %s; want the longest allowed named", b)
	}
}

// TestWatchQuotaPerToken: token A's watch streams past its quota get 429
// naming the quota while B still watches; a stream A closes is given
// back; the per-client bound (address and role) still applies to all.
func TestWatchQuotaPerToken(t *testing.T) {
	opts := tokenOpts()
	opts.MaxWatchersPerToken = 2
	s := start(t, opts)
	w1 := watchSSE(t, s.url+"/v1/watch", bearer(tokenA)...)
	watchSSE(t, s.url+"/v1/watch", bearer(tokenA)...)
	resp := request(t, "GET", s.url+"/v1/watch", nil, bearer(tokenA)...)
	expectQuota(t, "A's third stream", resp, "max_watchers_per_token", 2, "this token has 2 watch streams open")
	watchSSE(t, s.url+"/v1/watch", bearer(tokenB)...)
	watchSSE(t, s.url+"/v1/watch", bearer(tokenB)...)
	for range 3 {
		watchSSE(t, s.url+"/v1/watch", bearer(tokenAdmin)...)
	}
	// A closes one: once the server has seen it go, A opens another.
	w1.cancel()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := request(t, "GET", s.url+"/v1/watch", nil, bearer(tokenA)...)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("A's stream after closing one: %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQuotaPerAddressWithoutToken: a server without a token counts each
// client address as one credential, and says which address is at its
// quota.
func TestQuotaPerAddressWithoutToken(t *testing.T) {
	s := start(t, httpapi.Options{ReapInterval: -1, MaxInstancesPerToken: 1, MaxLeasesPerToken: 1})
	register(t, s, instanceBody("one"))
	resp := request(t, "PUT", s.url+"/v1/instances", instanceBody("two"))
	expectQuota(t, "the address's second instance", resp, "max_instances_per_token", 1, "this address (127.0.0.1) owns 1 live instance")
	if code, b, _ := acquire(t, s, "", "l1", "h"); code != 200 {
		t.Fatalf("lease: %d %s", code, b)
	}
	resp = request(t, "POST", s.url+"/v1/leases/acquire", map[string]any{"name": "l2", "holder": "h", "ttl": "1m"})
	expectQuota(t, "the address's second lease", resp, "max_leases_per_token", 1, "this address (127.0.0.1) holds 1 lease")
}

// TestInstanceQuotaPerTokenConcurrent: registrations of one token at once
// are never let past its quota together: of 20 at once under a quota of
// 5, at most 5 are stored (the others get 429), and the other token is
// not held up.
func TestInstanceQuotaPerTokenConcurrent(t *testing.T) {
	opts := tokenOpts()
	opts.MaxInstancesPerToken = 5
	s := start(t, opts)
	codes := make(chan int, 20)
	for i := range 20 {
		go func() {
			req, _ := http.NewRequest("PUT", s.url+"/v1/instances", strings.NewReader(`{"name":"c`+strconv.Itoa(i)+`","type":"writer","address":"127.0.0.1:4317"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokenA)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0 // reported below, by the test's goroutine
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	register(t, s, instanceBody("other"), bearer(tokenB)...)
	ok := 0
	for range 20 {
		switch c := <-codes; c {
		case 200:
			ok++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("a registration at once: %d", c)
		}
	}
	stored := 0
	for _, in := range listAll(t, s) {
		if strings.HasPrefix(in.Name, "c") {
			stored++
		}
	}
	if ok < 1 || ok > 5 || stored != ok {
		t.Fatalf("%d registrations answered 200, %d stored; want 1 to 5, all stored", ok, stored)
	}
}
