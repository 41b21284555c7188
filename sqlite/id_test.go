package sqlite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/idgen"
	"github.com/switchboard-io/switchboard/internal/idgen/idgentest"
)

// The ids a handle generates are UUID v4 that share their first four bytes;
// another handle's start otherwise (a 2⁻³² chance that two handles draw
// the same prefix, which only costs locality).
func TestGeneratedIDsAreUUIDv4WithTheHandlesPrefix(t *testing.T) {
	a, _ := newFile(t)
	b, _ := newFile(t)
	prefix := func(c *Catalog) string {
		t.Helper()
		var first string
		for range 20 {
			in, err := c.Register(tctx(t), switchboard.Instance{Name: "svc", Type: "svc", Address: "127.0.0.1:80"})
			if err != nil {
				t.Fatal(err)
			}
			idgentest.RequireV4(t, in.ID)
			p := in.ID[:8]
			if first == "" {
				first = p
			} else if p != first {
				t.Fatalf("ids of one handle start %s and %s", first, p)
			}
		}
		return first
	}
	if pa, pb := prefix(a), prefix(b); pa == pb {
		t.Fatalf("two handles' ids both start %s", pa)
	}
	// An id the caller gives is kept as it is.
	in, err := a.Register(tctx(t), switchboard.Instance{ID: "pod-7", Name: "svc", Type: "svc", Address: "127.0.0.1:80"})
	if err != nil || in.ID != "pod-7" {
		t.Fatalf("given id: %q, %v", in.ID, err)
	}
}

// What the prefix is for: among the rows of 100 processes registered
// interleaved (as a fleet starts), one process's heartbeat of its 50
// rewrites a few pages, counted as the frames its commit adds to the WAL.
// With fully random ids (the control) the same heartbeat rewrites a table
// page per row.
func TestOneHandlesHeartbeatRewritesFewPages(t *testing.T) {
	const handles, each = 100, 50
	frames := func(gen func(h int) string) int {
		c, _ := newFile(t)
		mine := registerInterleaved(t, c, handles, each, func(h, i int) switchboard.Instance {
			return switchboard.Instance{ID: gen(h), Name: fmt.Sprintf("svc-%d", h), Type: "svc",
				Address: fmt.Sprintf("10.0.%d.%d:80", h, i), Capabilities: []string{"a", "b"},
				Metadata: map[string]string{"zone": "z", "pod": strings.Repeat("p", 40)}}
		})[0]
		db := catalogDB(t, c)
		beat := func() {
			if missing, err := c.Heartbeat(tctx(t), mine...); err != nil || len(missing) > 0 {
				t.Fatalf("heartbeat: %v, missing %v", err, missing)
			}
		}
		// The first heartbeat also gathers the rows' entries in the
		// expiry index (ttl_ms, last_seen), registered at 50 times; a
		// process's every later one moves 50 neighbouring entries. The
		// one measured starts on a WAL truncated to nothing, so that
		// the WAL's length after it is its frames (whether or not its
		// commit started the WAL over).
		beat()
		walCheckpoint(t, db, "TRUNCATE")
		beat()
		return walCheckpoint(t, db, "PASSIVE")
	}
	srcs := make([]idgen.Source, handles)
	for h := range srcs {
		srcs[h] = idgen.New()
	}
	prefixed := frames(func(h int) string { return srcs[h].Next() })
	random := frames(func(int) string { return uuid.NewString() })
	t.Logf("a heartbeat of %d rows among %d: %d WAL frames with the handle's prefix, %d with random ids", each, handles*each, prefixed, random)
	if prefixed > 20 {
		t.Errorf("with the handle's prefix the heartbeat wrote %d pages, want at most 20", prefixed)
	}
	if random < 40 {
		t.Errorf("control: with random ids the heartbeat wrote only %d pages; the test no longer shows the scatter", random)
	}
}
