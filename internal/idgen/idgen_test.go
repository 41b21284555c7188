package idgen

import (
	"testing"

	"github.com/google/uuid"
)

func TestNextIsUUIDv4WithTheSourcesPrefix(t *testing.T) {
	a, b := New(), New()
	seen := map[string]bool{}
	for range 1000 {
		id := a.Next()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("%q: not a UUID v4 in canonical form (%v)", id, err)
		}
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
