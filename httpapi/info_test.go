package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
)

// TestInfoDefaultTTL: /v1/info says the default TTL of a catalog that
// tells it (switchboard.TTLDefaulter), as stored ("2.001s" for 2000.4 ms,
// whole milliseconds rounded up), and nothing for one that does not.
func TestInfoDefaultTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		hide bool // serve a catalog that does not tell its default TTL
		want string
	}{
		{"tells", false, "2.001s"},
		{"does not tell", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := switchboard.Open(context.Background(), "sqlite://"+t.TempDir()+"/c.db",
				switchboard.Options{DefaultTTL: 2000400 * time.Microsecond, Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cat.Close() })
			if tc.hide {
				cat = struct{ switchboard.Catalog }{cat} // only the Catalog methods
			}
			s := serveOn(t, cat, httpapi.Options{})
			code, b := call(t, "GET", s.url+"/v1/info", nil)
			var info httpapi.Info
			var raw map[string]any
			if code != 200 || json.Unmarshal(b, &info) != nil || json.Unmarshal(b, &raw) != nil {
				t.Fatalf("/v1/info: %d %s", code, b)
			}
			_, present := raw["default_ttl"]
			if info.DefaultTTL != tc.want || present != (tc.want != "") {
				t.Fatalf("/v1/info: default_ttl %q (present: %v), want %q: %s", info.DefaultTTL, present, tc.want, b)
			}
			if tc.want == "" {
				return
			}
			// The default it says is the TTL an instance without one gets.
			r := register(t, s, instanceBody("default-ttl"))
			if d, err := time.ParseDuration(info.DefaultTTL); err != nil || r.Instance.TTL != d {
				t.Fatalf("registered without a TTL: stored %v; /v1/info says %q", r.Instance.TTL, info.DefaultTTL)
			}
		})
	}
}

// TestInfoVersion: /v1/info names the server's release when it is
// configured (a client names it when the server refuses a newer field),
// and leaves the field out otherwise.
func TestInfoVersion(t *testing.T) {
	for _, want := range []string{"switchboard v1.2.3 (revision abc)", ""} {
		cat, err := switchboard.Open(context.Background(), "sqlite://"+t.TempDir()+"/c.db", switchboard.Options{Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		s := serveOn(t, cat, httpapi.Options{Version: want})
		code, b := call(t, "GET", s.url+"/v1/info", nil)
		var raw map[string]any
		if code != 200 || json.Unmarshal(b, &raw) != nil {
			t.Fatalf("/v1/info: %d %s", code, b)
		}
		got, present := raw["version"]
		if present != (want != "") || present && got != want {
			t.Errorf("/v1/info version %v (present %v), want %q", got, present, want)
		}
	}
}
