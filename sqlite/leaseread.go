package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/switchboard-io/switchboard"
)

// Lease implements switchboard.LeaseReader.
func (c *Catalog) Lease(ctx context.Context, name string) (switchboard.Lease, error) {
	if c.closed.Load() {
		return switchboard.Lease{}, errClosed("lease")
	}
	var r leaseRow
	err := c.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `SELECT holder, token, ttl_ms, expires_at FROM leases WHERE name = ?`, name).
			Scan(&r.holder, &r.token, &r.ttlMS, &r.expiresAt)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Lease{}, fmt.Errorf("sqlite: lease %q: %w", name, switchboard.ErrNotFound)
	}
	if err != nil {
		return switchboard.Lease{}, fmt.Errorf("sqlite: lease %q: %w", name, err)
	}
	return r.lease(name), nil
}

// LeasesAfter implements switchboard.LeaseReader.
func (c *Catalog) LeasesAfter(ctx context.Context, after string, limit int) ([]switchboard.Lease, error) {
	if c.closed.Load() {
		return nil, errClosed("leases")
	}
	if limit < 1 {
		return nil, fmt.Errorf("sqlite: leases: %w: limit %d; want at least 1", switchboard.ErrInvalid, limit)
	}
	var out []switchboard.Lease
	err := c.read(ctx, func(tx *txn) error {
		out = []switchboard.Lease{}
		rows, err := tx.QueryContext(ctx, `SELECT name, holder, token, ttl_ms, expires_at FROM leases WHERE name > ? ORDER BY name LIMIT ?`, after, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name string
				r    leaseRow
			)
			if err := rows.Scan(&name, &r.holder, &r.token, &r.ttlMS, &r.expiresAt); err != nil {
				return err
			}
			out = append(out, r.lease(name))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: leases: %w", err)
	}
	return out, nil
}

// LeaseCount implements switchboard.LeaseReader.
func (c *Catalog) LeaseCount(ctx context.Context) (int, error) {
	if c.closed.Load() {
		return 0, errClosed("leases")
	}
	var n int
	err := c.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM leases`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: leases: %w", err)
	}
	return n, nil
}
