package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
)

// The conditions of byTTL that reaps and renewal reads select rows by, and
// what their parameters are.
const (
	staleCond   = `i.last_seen < ? - 2 * ttls.t * 1000` // stale for twice its TTL (now)
	graceCond   = staleCond + ` AND ttls.t <= ?`        // … and its TTL within the grace (now, ms)
	olderCond   = `i.last_seen < ?`                     // last seen before (a time)
	renewedCond = `i.last_seen > ?`                     // renewed after (a time)
)

// renewedSQL reads the id and last_seen of the rows renewed after its
// parameter (RenewedSince).
var renewedSQL = byTTL("i.id, i.last_seen", renewedCond)

// reapSQL returns the statements of a reap of the rows cond selects: the
// look in a read transaction, the change-log entries (parameters: reason,
// now, then cond's) and the deletion.
func reapSQL(cond string) (look, logged, del string) {
	due := byTTL("i.id", cond)
	return `SELECT EXISTS (` + due + `)`,
		`INSERT INTO changes (id, op, reason, at) SELECT id, 'delete', ?, ? FROM (` + due + `) ORDER BY id`,
		`DELETE FROM instances WHERE id IN (` + due + `)`
}

// ReapGrace implements switchboard.GraceReaper: it deletes the rows stale
// for twice their own TTL whose TTL is at most reachableFor, in one
// transaction, and logs each removal with reason "expired".
func (c *Catalog) ReapGrace(ctx context.Context, reachableFor time.Duration) (int, error) {
	if reachableFor < 0 {
		return 0, fmt.Errorf("sqlite: reap: %w: negative reachableFor %s", switchboard.ErrInvalid, reachableFor)
	}
	return c.reap(ctx, graceCond, func(now int64) []any { return []any{now, reachableFor.Milliseconds()} })
}

// reap deletes the rows that cond, a condition of byTTL, selects with the
// parameters args gives for the catalog's now (in microseconds), logging
// each removal with reason "expired" in the same transaction, and returns
// how many it deleted. It looks first in a read transaction, which no
// writer waits for: every process reaps, and a reap that finds nothing
// (nearly all of them) must not take the file's one write lock.
func (c *Catalog) reap(ctx context.Context, cond string, args func(now int64) []any) (int, error) {
	if c.closed.Load() {
		return 0, errClosed("reap")
	}
	if err := c.dropOldLeases(ctx); err != nil {
		return 0, fmt.Errorf("sqlite: reap: old leases: %w", err)
	}
	look, logSQL, del := reapSQL(cond)
	var found bool
	err := c.read(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, look, args(now)...).Scan(&found)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: reap: %w", err)
	}
	if !found {
		return 0, nil
	}
	var n int
	err = c.write(ctx, func(tx *txn) error {
		n = 0
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, logSQL, append([]any{string(switchboard.ReasonExpired), now}, args(now)...)...)
		if err != nil {
			return err
		}
		logged, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if logged == 0 {
			return errNoChange
		}
		if res, err = tx.ExecContext(ctx, del, args(now)...); err != nil {
			return err
		}
		deleted, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if deleted != logged {
			return fmt.Errorf("deleted %d rows but logged %d", deleted, logged)
		}
		n = int(deleted)
		return c.maybeTrim(ctx, tx, now)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: reap: %w", err)
	}
	return n, nil
}
