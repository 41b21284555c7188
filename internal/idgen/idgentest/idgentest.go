// Package idgentest holds the test assertion the packages that generate
// instance ids share: that an id is a UUID v4 in canonical form. It imports
// no catalog, so any package's tests may use it.
package idgentest

import (
	"testing"

	"github.com/google/uuid"
)

// RequireV4 fails t unless id is a UUID of version 4 and the RFC 4122
// variant, written in canonical form (lower-case, hyphenated).
func RequireV4(t testing.TB, id string) {
	t.Helper()
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
		t.Fatalf("id %q: not a UUID v4 in canonical form (%v)", id, err)
	}
}
