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
	err := c.read(ctx, func(tx *txn) (err error) {
		r, err = readLease(ctx, tx, name)
		return err
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
	if limit < 1 {
		return nil, fmt.Errorf("sqlite: leases: %w: limit %d; want at least 1", switchboard.ErrInvalid, limit)
	}
	return c.listLeases(ctx, `SELECT name, holder, token, ttl_ms, expires_at FROM leases WHERE name > ? ORDER BY name LIMIT ?`, after, limit)
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
