package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// RunLimits checks the input limits of one request (capabilities per
// instance, the maximum TTL, the ids of one heartbeat): each is a
// FieldError naming the field, and nothing stored changes. open must give
// catalogs with the default switchboard.Options.MaxTTL.
func RunLimits(t *testing.T, open Open) {
	runCases(t, open, []testCase{
		{"Capabilities", testCapabilityLimit},
		{"MaxTTL", testMaxTTL},
		{"HeartbeatIDs", testHeartbeatIDs},
		{"LeaseNames", testLeaseLimits},
	})
}

// wantField fails unless err is a FieldError on field wrapping ErrInvalid.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *switchboard.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("want an invalid %s, got %v", field, err)
	}
}

// unchanged fails unless the catalog holds exactly want (by id, content).
func unchanged(t *testing.T, c switchboard.Catalog, want switchboard.Instance) {
	t.Helper()
	all, err := c.List(ctx(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].ID != want.ID || !slices.Equal(all[0].Capabilities, want.Capabilities) ||
		all[0].TTL != want.TTL || !all[0].LastSeen.Equal(want.LastSeen) {
		t.Fatalf("stored rows changed by rejected input: %+v, want %+v", all, want)
	}
}

func testCapabilityLimit(t *testing.T, c switchboard.Catalog) {
	caps := make([]string, switchboard.MaxCapabilities+1)
	for i := range caps {
		caps[i] = fmt.Sprintf("cap-%d", i)
	}
	good := mustRegister(t, c, sample("limits", caps[:switchboard.MaxCapabilities]...))
	if len(good.Capabilities) != switchboard.MaxCapabilities {
		t.Fatalf("stored %d capabilities, want %d", len(good.Capabilities), switchboard.MaxCapabilities)
	}
	in := good
	in.Capabilities = caps
	_, err := c.Register(ctx(t), in)
	wantField(t, err, "capabilities")
	fresh := sample("other", caps...)
	_, err = c.Register(ctx(t), fresh)
	wantField(t, err, "capabilities")
	unchanged(t, c, good)
}

func testMaxTTL(t *testing.T, c switchboard.Catalog) {
	in := sample("limits")
	in.TTL = switchboard.DefaultMaxTTL
	good := mustRegister(t, c, in)
	if good.TTL != switchboard.DefaultMaxTTL {
		t.Fatalf("stored ttl %s, want %s", good.TTL, switchboard.DefaultMaxTTL)
	}
	for _, ttl := range []time.Duration{switchboard.DefaultMaxTTL + time.Millisecond, 24 * time.Hour, 1<<63 - 1} {
		over := good
		over.TTL = ttl
		_, err := c.Register(ctx(t), over)
		wantField(t, err, "ttl")
		fresh := sample("other")
		fresh.TTL = ttl
		_, err = c.Register(ctx(t), fresh)
		wantField(t, err, "ttl")
	}
	unchanged(t, c, good)
}

func testHeartbeatIDs(t *testing.T, c switchboard.Catalog) {
	good := mustRegister(t, c, sample("limits"))
	// Let the catalog clock move, so a renewal would show.
	for start := good.LastSeen; ; time.Sleep(2 * time.Millisecond) {
		now, err := c.Now(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if now.Sub(start) > 5*time.Millisecond {
			break
		}
	}
	_, err := c.Heartbeat(ctx(t), good.ID, "has space")
	wantField(t, err, "ids[1]")
	_, err = c.Heartbeat(ctx(t), good.ID, "")
	wantField(t, err, "ids[1]")
	many := make([]string, switchboard.MaxHeartbeatIDs+1)
	many[0] = good.ID
	for i := 1; i < len(many); i++ {
		many[i] = fmt.Sprintf("gone-%d", i)
	}
	_, err = c.Heartbeat(ctx(t), many...)
	wantField(t, err, "ids")
	unchanged(t, c, good)

	// The limit itself is accepted: every id but ours is reported missing.
	missing, err := c.Heartbeat(ctx(t), many[:switchboard.MaxHeartbeatIDs]...)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != switchboard.MaxHeartbeatIDs-1 || slices.Contains(missing, good.ID) {
		t.Fatalf("heartbeat of %d ids: %d missing", switchboard.MaxHeartbeatIDs, len(missing))
	}
	after, err := c.Get(ctx(t), good.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.LastSeen.After(good.LastSeen) {
		t.Fatalf("the accepted heartbeat did not renew %s", good.ID)
	}
}

func testLeaseLimits(t *testing.T, c switchboard.Catalog) {
	l, ok := c.(switchboard.Leaser)
	if !ok {
		t.Skip("the catalog offers no leases")
	}
	name, holder := strings.Repeat("n", switchboard.MaxLeaseName), strings.Repeat("h", switchboard.MaxLeaseHolder)
	if _, err := l.Acquire(ctx(t), name, holder, time.Minute); err != nil {
		t.Fatalf("lease at the limits: %v", err)
	}
	for _, bad := range []struct{ name, holder, field string }{
		{name + "n", "h", "lease name"},
		{"n", holder + "h", "lease holder"},
		{"n", "a\x00b", "lease holder"},
		{"n\xff", "h", "lease name"},
	} {
		_, err := l.Acquire(ctx(t), bad.name, bad.holder, time.Minute)
		wantField(t, err, bad.field)
	}
	ls, err := l.Leases(ctx(t))
	if err != nil || len(ls) != 1 || ls[0].Name != name || ls[0].Holder != holder {
		t.Fatalf("leases after rejected input: %+v %v", ls, err)
	}
}
