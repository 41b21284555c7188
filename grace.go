package switchboard

import (
	"context"
	"fmt"
	"time"
)

// GraceReaper is implemented by catalogs that reap with the post-outage
// grace in one call (both SQL backends, and the http:// client, whose
// server applies it): no row is read into the caller.
type GraceReaper interface {
	// ReapGrace deletes the rows stale for twice their own TTL whose TTL
	// is at most reachableFor, how long the catalog has been reachable to
	// the caller; it returns how many it deleted. A row with a longer TTL
	// is still inside its grace: its owner has not yet had one TTL of
	// reachability to renew it. reachableFor < 0 is ErrInvalid.
	ReapGrace(ctx context.Context, reachableFor time.Duration) (int, error)
}

// ReapGrace reaps cat with the post-outage grace: it deletes the rows
// stale for twice their own TTL whose TTL is at most reachableFor (each row
// gets its own TTL of reachability to heartbeat after an outage, and a row
// with a long TTL does not hold back the reaping of short ones). A catalog
// that implements GraceReaper does it in one call. Any other is listed
// first, and the round is skipped (0, nil) while a stale row is still
// inside its grace, since Catalog.Reap cannot choose rows by their TTL.
func ReapGrace(ctx context.Context, cat Catalog, reachableFor time.Duration) (int, error) {
	if reachableFor < 0 {
		return 0, fmt.Errorf("reap: %w: negative reachableFor %s", ErrInvalid, reachableFor)
	}
	if g, ok := cat.(GraceReaper); ok {
		return g.ReapGrace(ctx, reachableFor)
	}
	n, _, err := reapListed(ctx, cat, reachableFor)
	return n, err
}

// reapListed is ReapGrace for a catalog that is not a GraceReaper: it lists
// every row, skips the round while a stale row's TTL is longer than
// reachableFor, and otherwise reaps with Catalog.Reap. longest is the
// longest TTL listed: once reachableFor reaches it, no row can be inside
// its grace until the next outage.
func reapListed(ctx context.Context, cat Catalog, reachableFor time.Duration) (n int, longest time.Duration, err error) {
	rows, err := cat.List(ctx, Query{All: true})
	if err != nil {
		return 0, 0, err
	}
	waiting := false
	for _, in := range rows {
		longest = max(longest, in.TTL)
		waiting = waiting || in.Stale && in.TTL > reachableFor
	}
	if waiting {
		return 0, longest, nil
	}
	n, err = cat.Reap(ctx, 0)
	return n, longest, err
}
