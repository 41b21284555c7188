package httpapi

import (
	"strings"
	"testing"
	"time"
)

// TestTags: a token's tag and an address's are tagLen long, the same for
// the same credential (every server derives the same one), different for
// different ones, and hold neither the token nor the address.
func TestTags(t *testing.T) {
	start := time.Now()
	a, b := tokenTag("token-a-0123456789"), tokenTag("token-b-0123456789")
	t.Logf("one token's tag: %s", time.Since(start)/2)
	if a != tokenTag("token-a-0123456789") || a == b {
		t.Fatalf("token tags %q %q: want stable and distinct", a, b)
	}
	x, y := addressTag("127.0.0.1"), addressTag("::1")
	if x != addressTag("127.0.0.1") || x == y {
		t.Fatalf("address tags %q %q: want stable and distinct", x, y)
	}
	for _, tag := range []string{a, b, x, y} {
		if len(tag) != tagLen || strings.Contains(tag, holderSep) {
			t.Fatalf("tag %q: %d bytes, want %d without %q", tag, len(tag), tagLen, holderSep)
		}
	}
	if strings.Contains(a, "token-a") || strings.Contains(x, "127.0.0.1") {
		t.Fatal("a tag shows its credential")
	}
	if !strings.HasPrefix(a, "t1.") || !strings.HasPrefix(x, "a1.") {
		t.Fatalf("tags %q %q: want the t1. and a1. forms", a, x)
	}
}
