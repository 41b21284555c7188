package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
)

// Lease implements switchboard.LeaseReader.
func (c *Catalog) Lease(ctx context.Context, name string) (switchboard.Lease, error) {
	if err := c.check(); err != nil {
		return switchboard.Lease{}, err
	}
	var (
		l   switchboard.Lease
		err = pgx.ErrNoRows // a name PostgreSQL cannot hold names no row
	)
	if storable(name) {
		l, err = scanLease(c.pool.QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE name = $1`, name))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Lease{}, fmt.Errorf("postgres: lease %q: %w", name, switchboard.ErrNotFound)
	}
	if err != nil {
		return switchboard.Lease{}, c.wrap("lease", err)
	}
	return l, nil
}

// LeasesAfter implements switchboard.LeaseReader.
func (c *Catalog) LeasesAfter(ctx context.Context, after string, limit int) ([]switchboard.Lease, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("postgres: leases: %w: limit %d; want at least 1", switchboard.ErrInvalid, limit)
	}
	if !storable(after) {
		return nil, fmt.Errorf("postgres: leases: %w: after must be UTF-8 without NUL", switchboard.ErrInvalid)
	}
	rows, err := c.pool.Query(ctx, `SELECT `+leaseCols+` FROM leases WHERE name > $1 ORDER BY name LIMIT $2`, after, limit)
	if err != nil {
		return nil, c.wrap("leases", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.Lease, error) { return scanLease(r) })
	if err != nil {
		return nil, c.wrap("leases", err)
	}
	return out, nil
}

// LeaseCount implements switchboard.LeaseReader.
func (c *Catalog) LeaseCount(ctx context.Context) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	var n int
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM leases`).Scan(&n); err != nil {
		return 0, c.wrap("leases", err)
	}
	return n, nil
}
