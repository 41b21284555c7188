package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
)

// ReapGrace implements switchboard.GraceReaper: it deletes the rows stale
// for twice their own TTL whose TTL is at most reachableFor, in one
// transaction, and logs each removal with reason "expired".
func (c *Catalog) ReapGrace(ctx context.Context, reachableFor time.Duration) (int, error) {
	if c.closed.Load() {
		return 0, errClosed("reap")
	}
	if reachableFor < 0 {
		return 0, fmt.Errorf("sqlite: reap: %w: negative reachableFor %s", switchboard.ErrInvalid, reachableFor)
	}
	return c.reap(ctx, func(now int64) (string, []any) {
		return `i.last_seen < ? - 2 * ttls.t * 1000 AND ttls.t <= ?`, []any{now, reachableFor.Milliseconds()}
	})
}

// reap deletes the rows that where (given the catalog's now, in
// microseconds) selects, a condition of byTTL, logging each removal with
// reason "expired" in the same transaction, and returns how many it
// deleted. It looks first in a read transaction, which no writer waits
// for: every process reaps, and a reap that finds nothing (nearly all of
// them) must not take the file's one write lock.
func (c *Catalog) reap(ctx context.Context, where func(now int64) (string, []any)) (int, error) {
	var found bool
	err := c.read(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		cond, args := where(now)
		return tx.QueryRowContext(ctx, `SELECT EXISTS (`+byTTL("1", cond)+`)`, args...).Scan(&found)
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
		cond, args := where(now)
		due := byTTL("i.id", cond)
		res, err := tx.ExecContext(ctx, `INSERT INTO changes (id, op, reason, at)
			SELECT id, 'delete', ?, ? FROM (`+due+`) ORDER BY id`,
			append([]any{string(switchboard.ReasonExpired), now}, args...)...)
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
		if res, err = tx.ExecContext(ctx, `DELETE FROM instances WHERE id IN (`+due+`)`, args...); err != nil {
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
