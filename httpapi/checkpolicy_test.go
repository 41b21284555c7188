package httpapi_test

import (
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/checks"
	"github.com/switchboard-io/switchboard/httpapi"
)

// A registration whose check targets a host that is neither the
// instance's own nor allowed is refused with 400 and stores nothing; one
// that checks its own host, or an allowed one, is stored.
func TestRegisterCheckPolicy(t *testing.T) {
	p, err := checks.ParsePolicy("checks.allow", "10.9.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, httpapi.Options{CheckPolicy: p.Check})
	body := func(target string) map[string]any {
		b := instanceBody("probed")
		b["address"] = "127.0.0.1:4317"
		b["check"] = map[string]any{"target": target, "interval": "10s"}
		return b
	}
	code, out := call(t, "PUT", s.url+"/v1/instances", body("http://169.254.169.254/latest/meta-data"))
	if code != 400 || !strings.Contains(string(out), "check.target") || !strings.Contains(string(out), "checks.allow") {
		t.Fatalf("check of a foreign host: %d %s", code, out)
	}
	if code, out := call(t, "GET", s.url+"/v1/instances?all=true", nil); code != 200 || strings.Contains(string(out), "probed") {
		t.Fatalf("a refused registration was stored: %d %s", code, out)
	}
	register(t, s, body("tcp://127.0.0.1:4317"))
	register(t, s, body("grpc://10.9.1.2:50051"))
	if code, out := call(t, "GET", s.url+"/v1/instances?all=true", nil); code != 200 || strings.Count(string(out), `"probed"`) != 2 {
		t.Fatalf("the allowed registrations (critical until checked) are not listed with all=true: %d %s", code, out)
	}
}
