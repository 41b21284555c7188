package checks

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestCount: the live runners are the unexpired, unreleased membership
// leases, this runner counted once whether or not its own is listed; the
// shards taken are those others hold; the soonest expiry is among the
// others' leases only, other lease names ignored.
func TestCount(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	leases := []switchboard.Lease{
		{Name: memberLease("me"), Holder: "me", ExpiresAt: at(time.Second)},
		{Name: memberLease("b"), Holder: "b", ExpiresAt: at(9 * time.Second)},
		{Name: memberLease("gone"), Holder: "gone", ExpiresAt: at(-time.Second)},
		{Name: memberLease("left"), Holder: "", ExpiresAt: at(time.Second)},
		{Name: shardLease(3), Holder: "me", ExpiresAt: at(time.Second)},
		{Name: shardLease(4), Holder: "b", ExpiresAt: at(7 * time.Second)},
		{Name: shardLease(5), Holder: "gone", ExpiresAt: now},
		{Name: "other", Holder: "x", ExpiresAt: at(2 * time.Second)},
	}
	live, taken, soonest := count(leases, "me", now)
	if live != 2 || len(taken) != 1 || !taken[4] || !soonest.Equal(at(7*time.Second)) {
		t.Errorf("count = %d, %v, %s; want 2, map[4:true], now+7s", live, taken, soonest.Sub(now))
	}
	live, taken, soonest = count(leases[1:], "me", now)
	if live != 2 || len(taken) != 1 || !soonest.Equal(at(7*time.Second)) {
		t.Errorf("without its own membership lease: count = %d, %v, %s; want 2, map[4:true], now+7s", live, taken, soonest.Sub(now))
	}
	if live, taken, soonest := count(nil, "me", now); live != 1 || len(taken) != 0 || !soonest.IsZero() {
		t.Errorf("no leases: count = %d, %v, %s; want 1, none, zero", live, taken, soonest)
	}
}
