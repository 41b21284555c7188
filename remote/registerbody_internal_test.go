package remote

import (
	"testing"

	"github.com/switchboard-io/switchboard"
)

// A registration's body leaves out what servers only write (a server of a
// release from before those fields refuses any field it does not know) and
// the default weight, and keeps a weight, zone or check the caller set.
func TestRegisterBodyLeavesOutputOnlyFields(t *testing.T) {
	in := switchboard.Instance{ID: "a", Name: "a", Type: "writer", Address: "127.0.0.1:1",
		Weight: switchboard.DefaultWeight, Draining: true, Revision: 7}
	m, err := registerBody(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(outputOnly, "weight", "zone", "check") {
		if _, ok := m[k]; ok {
			t.Errorf("body has %q: %s", k, m[k])
		}
	}
	for _, k := range []string{"id", "name", "type", "address", "ttl"} {
		if _, ok := m[k]; !ok {
			t.Errorf("body lacks %q", k)
		}
	}
	in.Weight, in.Zone = 5, "eu-1"
	in.Check = &switchboard.Check{Target: "http://127.0.0.1:1/health"}
	if m, err = registerBody(in); err != nil {
		t.Fatal(err)
	}
	if string(m["weight"]) != "5" || string(m["zone"]) != `"eu-1"` || m["check"] == nil {
		t.Errorf("body lost what the caller set: weight %s zone %s check %s", m["weight"], m["zone"], m["check"])
	}
}
