package switchboard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

func fullInstance() switchboard.Instance {
	loc := time.FixedZone("CEST", 2*60*60)
	return switchboard.Instance{
		ID:           "0b3c2f4e-1111-4222-8333-444455556666",
		Name:         "common-module",
		Type:         switchboard.TypeRouter,
		Address:      "[::1]:50051",
		Capabilities: []string{switchboard.CapRouting, "custom.cap"},
		Version:      "v1.2.3",
		Metadata:     map[string]string{"zone": "eu-1", "sdk": "0.9"},
		Components:   json.RawMessage(`{"components":[{"name":"c","ports":[]}]}`),
		TTL:          10 * time.Second,
		RegisteredAt: time.Date(2026, 3, 4, 7, 8, 9, 123456789, loc),
		LastSeen:     time.Date(2026, 3, 4, 7, 8, 19, 987000000, loc),
		Stale:        true,
		Weight:       250,
		Zone:         "eu-1a",
		Draining:     true,
		Check:        &switchboard.Check{Target: "http://[::1]:8080/healthz", Interval: 10 * time.Second, Timeout: 2 * time.Second, Failures: 3, Successes: 1, DeregisterAfter: 5 * time.Minute},
		Health:       switchboard.Health{Status: switchboard.StatusCritical, Output: "HTTP 503", Since: time.Date(2026, 3, 4, 7, 8, 10, 0, loc)},
	}
}

func decodeObject(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, b)
	}
	return m
}

func TestInstanceJSONFields(t *testing.T) {
	b, err := json.Marshal(fullInstance())
	if err != nil {
		t.Fatal(err)
	}
	m := decodeObject(t, b)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"address", "capabilities", "check", "components", "draining", "health", "id", "last_seen", "metadata", "name", "registered_at", "stale", "status", "ttl", "type", "version", "weight", "zone"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	exact := map[string]string{
		"id":            `"0b3c2f4e-1111-4222-8333-444455556666"`,
		"name":          `"common-module"`,
		"type":          `"router"`,
		"address":       `"[::1]:50051"`,
		"capabilities":  `["routing","custom.cap"]`,
		"version":       `"v1.2.3"`,
		"metadata":      `{"sdk":"0.9","zone":"eu-1"}`,
		"components":    `{"components":[{"name":"c","ports":[]}]}`,
		"ttl":           `"10s"`,
		"registered_at": `"2026-03-04T05:08:09.123Z"`, // UTC, milliseconds (truncated)
		"last_seen":     `"2026-03-04T05:08:19.987Z"`,
		"stale":         `true`,
		"weight":        `250`,
		"zone":          `"eu-1a"`,
		"draining":      `true`,
		"status":        `"draining"`, // draining overrides the check's status
		"check":         `{"target":"http://[::1]:8080/healthz","interval":"10s","timeout":"2s","failures":3,"successes":1,"deregister_after":"5m0s"}`,
		"health":        `{"status":"critical","output":"HTTP 503","since":"2026-03-04T05:08:10.000Z"}`,
	}
	for k, v := range exact {
		if got := string(m[k]); got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
	}
}

func TestInstanceJSONEmpty(t *testing.T) {
	b, err := json.Marshal(switchboard.Instance{ID: "x", Name: "n", TTL: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeObject(t, b)
	for k, want := range map[string]string{
		"capabilities": `[]`,
		"metadata":     `{}`,
		"ttl":          `"1.5s"`,
		"stale":        `false`,
		"version":      `""`,
		"status":       `"passing"`,
	} {
		if got := string(m[k]); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	if _, ok := m["components"]; ok {
		t.Errorf("components present for an instance without them: %s", b)
	}
	// Also through a pointer and inside a slice, as the CLI marshals lists.
	in := switchboard.Instance{ID: "y"}
	b2, err := json.Marshal([]*switchboard.Instance{&in})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b2, []byte(`"capabilities":[]`)) || !bytes.Contains(b2, []byte(`"metadata":{}`)) {
		t.Errorf("pointer marshal bypasses MarshalJSON: %s", b2)
	}
}

func TestInstanceJSONTimeFormat(t *testing.T) {
	in := switchboard.Instance{
		RegisteredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		LastSeen:     time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("X", -5*3600)),
	}
	m := decodeObject(t, mustMarshal(t, in))
	if got := string(m["registered_at"]); got != `"2026-01-02T03:04:05.000Z"` {
		t.Errorf("registered_at = %s, want milliseconds always written", got)
	}
	if got := string(m["last_seen"]); got != `"2027-01-01T04:59:59.999Z"` {
		t.Errorf("last_seen = %s, want converted to UTC", got)
	}
	for _, k := range []string{"registered_at", "last_seen"} {
		var s string
		if err := json.Unmarshal(m[k], &s); err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			t.Errorf("%s = %q is not RFC 3339: %v", k, s, err)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInstanceJSONRoundTrip(t *testing.T) {
	in := fullInstance()
	var out switchboard.Instance
	if err := json.Unmarshal(mustMarshal(t, in), &out); err != nil {
		t.Fatal(err)
	}
	want := in
	want.RegisteredAt = in.RegisteredAt.Truncate(time.Millisecond)
	want.LastSeen = in.LastSeen.Truncate(time.Millisecond)
	if !out.RegisteredAt.Equal(want.RegisteredAt) || !out.LastSeen.Equal(want.LastSeen) {
		t.Errorf("times = %v, %v; want %v, %v", out.RegisteredAt, out.LastSeen, want.RegisteredAt, want.LastSeen)
	}
	if out.RegisteredAt.Location() != time.UTC || out.LastSeen.Location() != time.UTC {
		t.Errorf("decoded times are not UTC: %v, %v", out.RegisteredAt.Location(), out.LastSeen.Location())
	}
	if !out.Health.Since.Equal(want.Health.Since) {
		t.Errorf("health.since = %v, want %v", out.Health.Since, want.Health.Since)
	}
	out.RegisteredAt, out.LastSeen, out.Health.Since = want.RegisteredAt, want.LastSeen, want.Health.Since
	if !reflect.DeepEqual(out, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, want)
	}

	// Zero times and a zero TTL survive too.
	var z switchboard.Instance
	if err := json.Unmarshal(mustMarshal(t, switchboard.Instance{ID: "z"}), &z); err != nil {
		t.Fatal(err)
	}
	if z.ID != "z" || !z.RegisteredAt.IsZero() || !z.LastSeen.IsZero() || z.TTL != 0 || len(z.Capabilities) != 0 || len(z.Metadata) != 0 {
		t.Errorf("zero round trip = %+v", z)
	}
}

func TestInstanceUnmarshalErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"ttl":"ten"}`, "ttl"},
		{`{"registered_at":"yesterday"}`, "registered_at"},
		{`{"last_seen":"2026-13-01T00:00:00Z"}`, "last_seen"},
		{`{"capabilities":"x"}`, "capabilities"},
		{`[`, ""},
	}
	for _, tt := range tests {
		in := switchboard.Instance{ID: "keep"}
		err := json.Unmarshal([]byte(tt.in), &in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Unmarshal(%s) = %v, want an error about %q", tt.in, err, tt.want)
		}
		if in.ID != "keep" {
			t.Errorf("Unmarshal(%s) modified the target on error: %+v", tt.in, in)
		}
	}
}

func TestEventJSON(t *testing.T) {
	in := switchboard.Instance{ID: "i1", Name: "m", Type: "t", Address: "h:1", TTL: 10 * time.Second}
	tests := []struct {
		ev     switchboard.Event
		event  string
		reason string // "" when absent
		hasIn  bool
		errMsg string
	}{
		{switchboard.Event{Kind: switchboard.EventAdded, Instance: in}, "added", "", true, ""},
		{switchboard.Event{Kind: switchboard.EventUpdated, Instance: in}, "updated", "", true, ""},
		{switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonExpired, Instance: in}, "removed", "expired", true, ""},
		{switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonDeregistered, Instance: in}, "removed", "deregistered", true, ""},
		{switchboard.Event{Kind: switchboard.EventSynced}, "synced", "", false, ""},
		{switchboard.Event{Kind: switchboard.EventError, Err: errors.New("catalog down")}, "error", "", false, "catalog down"},
	}
	for _, tt := range tests {
		b := mustMarshal(t, tt.ev)
		m := decodeObject(t, b)
		if got := string(m["event"]); got != `"`+tt.event+`"` {
			t.Errorf("%s: event = %s, want %q", b, got, tt.event)
		}
		if r, ok := m["reason"]; tt.reason != "" && string(r) != `"`+tt.reason+`"` {
			t.Errorf("%s: reason = %s, want %q", b, r, tt.reason)
		} else if tt.reason == "" && ok && string(r) != `""` {
			t.Errorf("%s: unexpected reason %s", b, r)
		}
		raw, ok := m["instance"]
		if ok != tt.hasIn {
			t.Errorf("%s: instance present = %v, want %v", b, ok, tt.hasIn)
		}
		if tt.hasIn {
			im := decodeObject(t, raw)
			if string(im["id"]) != `"i1"` || string(im["ttl"]) != `"10s"` || string(im["capabilities"]) != `[]` || string(im["metadata"]) != `{}` {
				t.Errorf("%s: instance not in the Instance JSON contract", b)
			}
		}
		if e, ok := m["error"]; tt.errMsg != "" && string(e) != `"`+tt.errMsg+`"` {
			t.Errorf("%s: error = %s, want %q", b, e, tt.errMsg)
		} else if tt.errMsg == "" && ok {
			t.Errorf("%s: unexpected error field", b)
		}
	}
	// Exact bytes of the common case, in field order.
	want := `{"event":"removed","reason":"expired","instance":{"id":"i1","name":"m","type":"t","address":"h:1","capabilities":[],"version":"","metadata":{},"ttl":"10s","registered_at":"","last_seen":"","stale":false,"status":"passing"}}`
	if got := string(mustMarshal(t, tests[2].ev)); got != want {
		t.Errorf("removed event =\n%s\nwant\n%s", got, want)
	}
}
