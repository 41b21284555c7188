package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
)

// leaseRow is a lease as stored.
type leaseRow struct {
	holder    string
	token     int64
	ttlMS     int64
	expiresAt int64
}

func (r leaseRow) lease(name string) switchboard.Lease {
	return switchboard.Lease{
		Name: name, Holder: r.holder, Token: r.token,
		TTL:       time.Duration(r.ttlMS) * time.Millisecond,
		ExpiresAt: time.UnixMicro(r.expiresAt).UTC(),
	}
}

func checkNames(name, holder string) error { return switchboard.ValidateLease(name, holder) }

func readLease(ctx context.Context, tx *txn, name string) (leaseRow, error) {
	var r leaseRow
	err := tx.QueryRowContext(ctx, `SELECT holder, token, ttl_ms, expires_at FROM leases WHERE name = ?`, name).
		Scan(&r.holder, &r.token, &r.ttlMS, &r.expiresAt)
	return r, err
}

// Acquire takes the lease name for holder when it is free, released or
// expired (by the SQLite clock), with a token one above the last one; when
// holder already holds it, it is renewed with the same token. Otherwise
// switchboard.ErrLeaseHeld.
func (c *Catalog) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if err := checkNames(name, holder); err != nil {
		return switchboard.Lease{}, fmt.Errorf("sqlite: acquire lease %q: %w", name, err)
	}
	ttlMS, err := backend.LeaseTTLMillis(ttl)
	if err != nil {
		return switchboard.Lease{}, fmt.Errorf("sqlite: acquire lease %q: %w", name, err)
	}
	if c.closed.Load() {
		return switchboard.Lease{}, errClosed(fmt.Sprintf("acquire lease %q", name))
	}
	var out switchboard.Lease
	err = c.write(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		cur, err := readLease(ctx, tx, name)
		next := leaseRow{holder: holder, ttlMS: ttlMS, expiresAt: now + ttlMS*1000}
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// A new lease, or one whose row was dropped (dropOldLeases):
			// above every token a dropped row held.
			if err = tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'lease_token_floor'`).Scan(&next.token); err != nil {
				return err
			}
			next.token++
			_, err = tx.ExecContext(ctx, `INSERT INTO leases (name, holder, token, ttl_ms, expires_at) VALUES (?, ?, ?, ?, ?)`,
				name, next.holder, next.token, next.ttlMS, next.expiresAt)
		case err != nil:
			return err
		case cur.holder == holder && cur.expiresAt > now:
			next.token = cur.token
			_, err = tx.ExecContext(ctx, `UPDATE leases SET ttl_ms = ?, expires_at = ? WHERE name = ?`,
				next.ttlMS, next.expiresAt, name)
		case cur.holder != "" && cur.expiresAt > now:
			return fmt.Errorf("%w: held by %q (token %d) for %s more", switchboard.ErrLeaseHeld, cur.holder,
				cur.token, time.Duration(cur.expiresAt-now)*time.Microsecond)
		default:
			next.token = cur.token + 1
			_, err = tx.ExecContext(ctx, `UPDATE leases SET holder = ?, token = ?, ttl_ms = ?, expires_at = ? WHERE name = ?`,
				next.holder, next.token, next.ttlMS, next.expiresAt, name)
		}
		out = next.lease(name)
		return err
	})
	if err != nil {
		return switchboard.Lease{}, fmt.Errorf("sqlite: acquire lease %q for %q: %w", name, holder, err)
	}
	return out, nil
}

// Renew extends l by its TTL (zero: the stored one) if it is still held by
// l.Holder with l.Token and has not expired; switchboard.ErrLeaseLost
// otherwise.
func (c *Catalog) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if err := checkNames(l.Name, l.Holder); err != nil {
		return switchboard.Lease{}, fmt.Errorf("sqlite: renew lease %q: %w", l.Name, err)
	}
	var ttlMS int64 // zero: keep the stored TTL
	if l.TTL != 0 {
		var err error
		if ttlMS, err = backend.LeaseTTLMillis(l.TTL); err != nil {
			return switchboard.Lease{}, fmt.Errorf("sqlite: renew lease %q: %w", l.Name, err)
		}
	}
	if c.closed.Load() {
		return switchboard.Lease{}, errClosed(fmt.Sprintf("renew lease %q", l.Name))
	}
	var out switchboard.Lease
	err := c.write(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		cur, err := readLease(ctx, tx, l.Name)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: no such lease", switchboard.ErrLeaseLost)
		case err != nil:
			return err
		case cur.holder != l.Holder || cur.token != l.Token:
			return fmt.Errorf("%w: now held by %q with token %d", switchboard.ErrLeaseLost, cur.holder, cur.token)
		case cur.expiresAt <= now:
			return fmt.Errorf("%w: expired %s ago", switchboard.ErrLeaseLost, time.Duration(now-cur.expiresAt)*time.Microsecond)
		}
		next := leaseRow{holder: l.Holder, token: l.Token, ttlMS: ttlMS}
		if next.ttlMS == 0 {
			next.ttlMS = cur.ttlMS
		}
		next.expiresAt = now + next.ttlMS*1000
		_, err = tx.ExecContext(ctx, `UPDATE leases SET ttl_ms = ?, expires_at = ? WHERE name = ?`,
			next.ttlMS, next.expiresAt, l.Name)
		out = next.lease(l.Name)
		return err
	})
	if err != nil {
		return switchboard.Lease{}, fmt.Errorf("sqlite: renew lease %q for %q: %w", l.Name, l.Holder, err)
	}
	return out, nil
}

// Release gives l up if it is still held with l.Token: the row stays (so
// the token keeps growing) with no holder and expires_at = now. Releasing a
// lease already released with the same token, or expired with nobody
// taking it over, is a no-op; switchboard.ErrLeaseLost when someone else
// took it since (or there is no such lease).
func (c *Catalog) Release(ctx context.Context, l switchboard.Lease) error {
	if err := checkNames(l.Name, l.Holder); err != nil {
		return fmt.Errorf("sqlite: release lease %q: %w", l.Name, err)
	}
	if c.closed.Load() {
		return errClosed(fmt.Sprintf("release lease %q", l.Name))
	}
	err := c.write(ctx, func(tx *txn) error {
		cur, err := readLease(ctx, tx, l.Name)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("%w: no such lease", switchboard.ErrLeaseLost)
		case err != nil:
			return err
		case cur.token == l.Token && cur.holder == "":
			return errNoChange
		case cur.token != l.Token || cur.holder != l.Holder:
			return fmt.Errorf("%w: now held by %q with token %d", switchboard.ErrLeaseLost, cur.holder, cur.token)
		}
		_, err = tx.ExecContext(ctx, `UPDATE leases SET holder = '', expires_at = `+nowSQL+` WHERE name = ?`, l.Name)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: release lease %q for %q: %w", l.Name, l.Holder, err)
	}
	return nil
}

// Leases lists every lease row, ordered by name; a released lease has an
// empty Holder.
func (c *Catalog) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	return c.listLeases(ctx, `SELECT name, holder, token, ttl_ms, expires_at FROM leases ORDER BY name`)
}

// listLeases runs query, which selects name, holder, token, ttl_ms and
// expires_at, in a read transaction.
func (c *Catalog) listLeases(ctx context.Context, query string, args ...any) ([]switchboard.Lease, error) {
	if c.closed.Load() {
		return nil, errClosed("leases")
	}
	var out []switchboard.Lease
	err := c.read(ctx, func(tx *txn) error {
		out = []switchboard.Lease{}
		rows, err := tx.QueryContext(ctx, query, args...)
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

// dropOldLeases deletes the lease rows released or expired more than
// c.keepLeases ago, recording the highest token they held as the floor new
// leases start above (so a name taken again never gets a token it had
// before). It looks in a read transaction first: every reap calls it, and
// one that finds nothing takes no write lock.
func (c *Catalog) dropOldLeases(ctx context.Context) error {
	var found bool
	err := c.read(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM leases WHERE expires_at < ?)`,
			now-c.keepLeases.Microseconds()).Scan(&found)
	})
	if err != nil || !found {
		return err
	}
	return c.write(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		before := now - c.keepLeases.Microseconds()
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = max(value,
			coalesce((SELECT max(token) FROM leases WHERE expires_at < ?), 0)) WHERE key = 'lease_token_floor'`, before); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM leases WHERE expires_at < ?`, before)
		return err
	})
}
