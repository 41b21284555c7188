package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// ReapGrace implements switchboard.GraceReaper: it deletes the rows stale
// for twice their own TTL whose TTL is at most reachableFor, in one
// statement, and logs each removal with reason "expired".
func (c *Catalog) ReapGrace(ctx context.Context, reachableFor time.Duration) (int, error) {
	if reachableFor < 0 {
		return 0, fmt.Errorf("postgres: reap: %w: reachableFor must not be negative", switchboard.ErrInvalid)
	}
	return c.reap(ctx, `now() - last_seen > 2 * ttl AND ttl <= $1::interval`, reachableFor)
}

// reap deletes the rows cond (with args) selects, skipping rows another
// transaction holds, logs each removal with reason "expired", and
// publishes them to this handle's watchers.
func (c *Catalog) reap(ctx context.Context, cond string, args ...any) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	if err := c.dropOldLeases(ctx); err != nil {
		return 0, c.wrap("reap: old leases", err)
	}
	logged, epoch, err := c.changeTx(ctx, func(tx pgx.Tx) (*logWrite, error) {
		rows, err := tx.Query(ctx, `DELETE FROM instances WHERE id IN (
				SELECT id FROM instances WHERE `+cond+` ORDER BY id FOR UPDATE SKIP LOCKED)
			RETURNING id`, args...)
		if err != nil {
			return nil, err
		}
		gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		if len(gone) == 0 {
			// Reaping runs in every process: let it keep the log short too.
			return nil, c.trim(ctx, tx)
		}
		return &logWrite{sql: `INSERT INTO changes (id, op, reason)
			SELECT x, 'delete', '` + string(switchboard.ReasonExpired) + `' FROM unnest($1::text[]) AS x ORDER BY x`,
			args: []any{gone}}, nil
	})
	if err != nil {
		return 0, c.wrap("reap", err)
	}
	if len(logged) == 0 {
		return 0, nil
	}
	changes := make([]hub.Change, len(logged))
	for i, l := range logged {
		changes[i] = hub.Change{ID: l.id, Seq: l.seq, Deleted: true, Reason: switchboard.ReasonExpired,
			Instance: switchboard.Instance{ID: l.id}}
	}
	c.publish(changes, logged[len(logged)-1].at, epoch)
	return len(changes), nil
}
