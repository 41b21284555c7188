package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
)

// Drain through the API: the owner's secret (or the admin token) drains
// and undrains, watchers see one updated event each way, another
// instance's secret is refused with 403 and an unknown id is 404, and
// weight, zone and a check round-trip.
func TestDrainRoute(t *testing.T) {
	s := start(t, httpapi.Options{Token: "client-token-0123", AdminToken: "admin-token-0123", ReapInterval: -1})
	client, admin := "Authorization", "Bearer client-token-0123"
	body := instanceBody("drained")
	body["weight"], body["zone"] = 250, "eu-1a"
	body["check"] = map[string]any{"target": "tcp://127.0.0.1:4317", "interval": "10s"}
	a := register(t, s, body, client, admin)
	if a.Instance.Weight != 250 || a.Instance.Zone != "eu-1a" || a.Instance.Check == nil || a.Instance.Check.Failures != 3 {
		t.Fatalf("registered %+v", a.Instance)
	}
	b := register(t, s, instanceBody("other"), client, admin)
	w := watchSSE(t, s.url+"/v1/watch?all=true&name=drained", client, admin)
	for ev := w.next(t); ev.event != "synced"; ev = w.next(t) {
	}

	url := s.url + "/v1/instances/" + a.Instance.ID + "/drain"
	if code, out := call(t, "POST", url, nil, client, admin, httpapi.SecretHeader, b.Secret); code != 403 {
		t.Fatalf("drain with another's secret: %d %s", code, out)
	}
	if code, out := call(t, "POST", s.url+"/v1/instances/nobody/drain", nil, client, "Bearer admin-token-0123"); code != 404 {
		t.Fatalf("drain of an unknown id: %d %s", code, out)
	}
	code, out := call(t, "POST", url, nil, client, admin, httpapi.SecretHeader, a.Secret)
	var got switchboard.Instance
	if code != 200 || json.Unmarshal(out, &got) != nil || !got.Draining || got.Status() != switchboard.StatusDraining {
		t.Fatalf("drain: %d %s", code, out)
	}
	ev := w.next(t)
	expectEvent(t, ev, "updated", "", a.Instance.ID)
	if in, _ := ev.data["instance"].(map[string]any); in["draining"] != true || in["status"] != "draining" {
		t.Fatalf("updated event: %s", ev.raw)
	}
	if code, out := call(t, "DELETE", url, nil, client, "Bearer admin-token-0123"); code != 200 {
		t.Fatalf("undrain by the admin: %d %s", code, out)
	}
	ev = w.next(t)
	expectEvent(t, ev, "updated", "", a.Instance.ID)
	if in, _ := ev.data["instance"].(map[string]any); in["draining"] != nil || in["status"] != "critical" { // its check has not run yet
		t.Fatalf("updated event: %s", ev.raw)
	}
	for _, bad := range []map[string]any{{"weight": 0.5}, {"weight": 10001}, {"zone": "a b"}, {"check": map[string]any{"target": "ftp://x:1", "interval": "10s"}}} {
		body := instanceBody("bad")
		for k, v := range bad {
			body[k] = v
		}
		if code, out := call(t, "PUT", s.url+"/v1/instances", body, client, admin); code != 400 {
			t.Errorf("%v: %d %s", bad, code, out)
		}
	}
}
