package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

func FuzzDecodeInstance(f *testing.F) {
	for _, s := range []string{
		`{"name":"x","type":"t","address":"127.0.0.1:1"}`,
		`{"id":"a","name":"x","type":"t","address":"[::1]:80","capabilities":["s"],"metadata":{"k":"v"},"ttl":"2s","components":{"a":[1]}}`,
		`{`, `[]`, `null`, `{"ttl":5}`, `{"capabilities":"x"}`, `{"x":1}`, `{} {}`, `{"metadata":{"switchboard.secret-sha256":"x"}}`,
		`{"registered_at":"yesterday"}`, "\x00", `{"name":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := httpapi.DecodeInstance(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if !in.RegisteredAt.IsZero() || !in.LastSeen.IsZero() || in.Stale {
			t.Fatalf("catalog-stamped fields taken from the body: %+v", in)
		}
		if _, ok := in.Metadata["switchboard.secret-sha256"]; ok {
			t.Fatal("reserved metadata key accepted")
		}
		// What decodes re-encodes and decodes to the same instance.
		again, err := json.Marshal(in)
		if err != nil {
			if in.Components != nil {
				return // components that are not valid JSON: the catalog rejects them
			}
			t.Fatalf("re-encode: %v", err)
		}
		back, err := httpapi.DecodeInstance(again)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", again, err)
		}
		if back.ID != in.ID || back.Name != in.Name || back.TTL != in.TTL || len(back.Capabilities) != len(in.Capabilities) {
			t.Fatalf("round trip: %+v vs %+v", back, in)
		}
	})
}

// FuzzRequests sends arbitrary bodies and paths to the write endpoints of a
// real server on SQLite: never a panic, always a JSON body on error, and
// only the documented statuses.
func FuzzRequests(f *testing.F) {
	for _, s := range []struct{ route, body string }{
		{"register", `{"name":"x","type":"t","address":"127.0.0.1:1"}`},
		{"register", `{"id":"x","name":"x","type":"t","address":"127.0.0.1:1","ttl":"-1s"}`},
		{"heartbeats", `{"instances":[{"id":"x","secret":"y"}]}`},
		{"heartbeats", `{"instances":[{"id":""}]}`},
		{"acquire", `{"name":"l","holder":"h","ttl":"1s"}`},
		{"renew", `{"name":"l","holder":"h","token":1,"ttl":"1s"}`},
		{"release", `{"name":"l","holder":"h","token":-1}`},
		{"heartbeat", "x"}, {"deregister", "%2F..%2F"}, {"get", "a b"},
	} {
		f.Add(s.route, s.body)
	}
	cat := testkit.OpenSQLite(f)
	api := httpapi.New(cat, httpapi.Options{Logger: quietLog(), ReapInterval: -1})
	f.Cleanup(func() { api.Close() })
	f.Fuzz(func(t *testing.T, route, body string) {
		var req *http.Request
		var err error
		switch route {
		case "register":
			req, err = http.NewRequest("PUT", "/v1/instances", strings.NewReader(body))
		case "heartbeats":
			req, err = http.NewRequest("POST", "/v1/heartbeats", strings.NewReader(body))
		case "acquire", "renew", "release":
			req, err = http.NewRequest("POST", "/v1/leases/"+route, strings.NewReader(body))
		case "heartbeat":
			req, err = http.NewRequest("PUT", "/v1/instances/"+body+"/heartbeat", nil)
		case "deregister":
			req, err = http.NewRequest("DELETE", "/v1/instances/"+body, nil)
		default:
			req, err = http.NewRequest("GET", "/v1/instances/"+body, nil)
		}
		if err != nil {
			return // not a valid URL: never reaches a server
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		validated(t, api).ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 204, 301, 307, 308:
			return
		case 400, 401, 403, 404, 405, 409, 413:
		default:
			t.Fatalf("%s %q: status %d %s", route, body, rec.Code, rec.Body)
		}
		if rec.Code == 301 || rec.Code == 405 {
			return // the mux's own redirects and method errors
		}
		var e httpapi.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Code == "" {
			t.Fatalf("%s %q: %d with a body that is not a JSON error: %s", route, body, rec.Code, rec.Body)
		}
	})
}
