package switchboard_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// FuzzInstanceJSON: Instance.UnmarshalJSON never panics, and what it reads
// it writes back to the same instance (times to the millisecond, the
// precision of the contract).
func FuzzInstanceJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"ttl":"10s"}`, `{"ttl":"ten"}`, `{"registered_at":"2026-01-02T03:04:05.006Z"}`,
		`{"last_seen":"yesterday"}`, `{"id":"a","name":"n","type":"t","address":"h:1","capabilities":["x"],"version":"1",` +
			`"metadata":{"k":"v"},"components":{"a":[1]},"ttl":"1.5s","registered_at":"2026-01-02T03:04:05.006+02:00","last_seen":"","stale":true}`,
		`{"components":null}`, `{"ttl":"-5s"}`, `{"ttl":"9999999999h"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var in switchboard.Instance
		if err := json.Unmarshal([]byte(s), &in); err != nil {
			return
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("Marshal of %+v (read from %q): %v", in, s, err)
		}
		var again switchboard.Instance
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("reading back %s (from %q): %v", b, s, err)
		}
		in.RegisteredAt = in.RegisteredAt.Truncate(time.Millisecond)
		in.LastSeen = in.LastSeen.Truncate(time.Millisecond)
		if len(in.Components) > 0 {
			var c1, c2 any
			if json.Unmarshal(in.Components, &c1) != nil || json.Unmarshal(again.Components, &c2) != nil || !reflect.DeepEqual(c1, c2) {
				t.Fatalf("components %s became %s", in.Components, again.Components)
			}
		}
		in.Components, again.Components = nil, nil
		if !in.RegisteredAt.Equal(again.RegisteredAt) || !in.LastSeen.Equal(again.LastSeen) {
			t.Fatalf("times %v %v became %v %v", in.RegisteredAt, in.LastSeen, again.RegisteredAt, again.LastSeen)
		}
		in.RegisteredAt, in.LastSeen, again.RegisteredAt, again.LastSeen = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if in.Capabilities == nil {
			in.Capabilities = []string{}
		}
		if in.Metadata == nil {
			in.Metadata = map[string]string{}
		}
		if !reflect.DeepEqual(in, again) {
			t.Fatalf("%q read as %+v, written as %s, read back as %+v", s, in, b, again)
		}
	})
}

// FuzzNormalize: Normalize never panics, wraps ErrInvalid in its errors,
// and what it accepts is in canonical form: normalizing it again changes
// nothing, and the name is sanitised, the TTL in whole milliseconds.
func FuzzNormalize(f *testing.F) {
	f.Add("svc", "writer", "127.0.0.1:1", "storage", "k", "v", "", "1", int64(10*time.Second), []byte(nil))
	f.Add("Ünïcode Name", "t", "nats://a.b", "a:b", "", "", "id-1", "", int64(1500123), []byte(`{"a":1}`))
	f.Add("", "", "", "", "", "", "", "", int64(-1), []byte(`{`))
	f.Fuzz(func(t *testing.T, name, typ, addr, capability, mk, mv, id, version string, ttl int64, comps []byte) {
		in := switchboard.Instance{ID: id, Name: name, Type: typ, Address: addr, Version: version, TTL: time.Duration(ttl), Components: comps}
		if capability != "" {
			in.Capabilities = []string{capability, capability}
		}
		if mk != "" {
			in.Metadata = map[string]string{mk: mv}
		}
		out, err := switchboard.Normalize(in)
		if err != nil {
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("Normalize error %v is not ErrInvalid", err)
			}
			return
		}
		if !switchboard.IsSanitized(out.Name) || out.TTL%time.Millisecond != 0 || out.TTL < 0 || len(out.Capabilities) > 1 {
			t.Fatalf("Normalize(%+v) = %+v: not canonical", in, out)
		}
		again, err := switchboard.Normalize(out)
		if err != nil || !reflect.DeepEqual(again, out) {
			t.Fatalf("Normalize not idempotent: %+v -> %+v -> %+v, %v", in, out, again, err)
		}
	})
}
