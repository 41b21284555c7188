package idgen

import (
	"testing"

	"github.com/switchboard-io/switchboard/internal/idgen/idgentest"
)

func TestNextIsUUIDv4WithTheSourcesPrefix(t *testing.T) {
	a, b := New(), New()
	seen := map[string]bool{}
	for range 1000 {
		id := a.Next()
		idgentest.RequireV4(t, id)
		if id[:8] != a.Next()[:8] {
			t.Fatalf("two ids of one source start differently: %s", id)
		}
		if seen[id] {
			t.Fatalf("%s twice", id)
		}
		seen[id] = true
	}
	// Two sources draw the same prefix with probability 2⁻³².
	if a.Next()[:8] == b.Next()[:8] {
		t.Fatal("two sources share their prefix")
	}
}
