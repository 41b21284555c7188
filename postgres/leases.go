package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
)

const leaseCols = `name, holder, token, ttl_ms, expires_at`

func scanLease(r pgx.Row) (switchboard.Lease, error) {
	var l switchboard.Lease
	var ttlMS int64
	if err := r.Scan(&l.Name, &l.Holder, &l.Token, &ttlMS, &l.ExpiresAt); err != nil {
		return switchboard.Lease{}, err
	}
	l.TTL = time.Duration(ttlMS) * time.Millisecond
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// checkNames checks a lease's name and holder (switchboard.ValidateLease).
func checkNames(name, holder string) error { return switchboard.ValidateLease(name, holder) }

// Acquire takes the lease if it is free, expired, or still held by holder,
// in one atomic statement judged by the database clock. The token grows
// with every new term: a new holder, or the same holder after its lease
// expired; a holder renewing its live lease keeps its token.
func (c *Catalog) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if err := c.check(); err != nil {
		return switchboard.Lease{}, err
	}
	if err := checkNames(name, holder); err != nil {
		return switchboard.Lease{}, fmt.Errorf("postgres: acquire: %w", err)
	}
	ms, err := backend.LeaseTTLMillis(ttl)
	if err != nil {
		return switchboard.Lease{}, fmt.Errorf("postgres: acquire: %w", err)
	}
	l, err := scanLease(c.pool.QueryRow(ctx, `INSERT INTO leases AS l (name, holder, token, ttl_ms, expires_at)
		VALUES ($1, $2, (SELECT lease_token_floor + 1 FROM change_log), $3::bigint, now() + $3::bigint * interval '1 millisecond')
		ON CONFLICT (name) DO UPDATE SET
			holder = EXCLUDED.holder,
			token = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > now() THEN l.token ELSE l.token + 1 END,
			ttl_ms = EXCLUDED.ttl_ms,
			expires_at = EXCLUDED.expires_at
		WHERE l.expires_at <= now() OR l.holder = EXCLUDED.holder OR l.holder = ''
		RETURNING `+leaseCols, name, holder, ms))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := scanLease(c.pool.QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE name = $1`, name))
		if gerr != nil {
			return switchboard.Lease{}, fmt.Errorf("postgres: acquire %q: %w", name, switchboard.ErrLeaseHeld)
		}
		return switchboard.Lease{}, fmt.Errorf("postgres: acquire %q: %w: %q holds it until %s (token %d)",
			name, switchboard.ErrLeaseHeld, cur.Holder, cur.ExpiresAt.Format(switchboard.TimeFormat), cur.Token)
	}
	if err != nil {
		return switchboard.Lease{}, c.wrap("acquire", err)
	}
	return l, nil
}

// Renew extends l by its TTL (zero: the stored one) from the database's
// now() if it is still held with l's token and has not expired;
// ErrLeaseLost otherwise.
func (c *Catalog) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if err := c.check(); err != nil {
		return switchboard.Lease{}, err
	}
	if err := checkNames(l.Name, l.Holder); err != nil {
		return switchboard.Lease{}, fmt.Errorf("postgres: renew: %w", err)
	}
	var ms int64
	if l.TTL != 0 {
		var err error
		if ms, err = backend.LeaseTTLMillis(l.TTL); err != nil {
			return switchboard.Lease{}, fmt.Errorf("postgres: renew: %w", err)
		}
	}
	out, err := scanLease(c.pool.QueryRow(ctx, `UPDATE leases SET
			ttl_ms = coalesce(nullif($4::bigint, 0), ttl_ms),
			expires_at = now() + coalesce(nullif($4::bigint, 0), ttl_ms) * interval '1 millisecond'
		WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > now()
		RETURNING `+leaseCols, l.Name, l.Holder, l.Token, ms))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Lease{}, fmt.Errorf("postgres: renew %q as %q (token %d): %w", l.Name, l.Holder, l.Token, switchboard.ErrLeaseLost)
	}
	if err != nil {
		return switchboard.Lease{}, c.wrap("renew", err)
	}
	return out, nil
}

// Release gives the lease up if it is still held with l's token: the row
// stays, with no holder, expiring now, and keeps its token so the next
// holder's is higher. Releasing it again, or after it expired with nobody
// taking it over, is a no-op; ErrLeaseLost when someone else holds it now
// (or there is no such lease).
func (c *Catalog) Release(ctx context.Context, l switchboard.Lease) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := checkNames(l.Name, l.Holder); err != nil {
		return fmt.Errorf("postgres: release: %w", err)
	}
	tag, err := c.pool.Exec(ctx, `UPDATE leases SET holder = '', expires_at = now()
		WHERE name = $1 AND holder = $2 AND token = $3`, l.Name, l.Holder, l.Token)
	if err != nil {
		return c.wrap("release", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	// Tokens only grow and a term's holder never changes but to '' on
	// release: what is there now says whether this term was released.
	var holder string
	var token int64
	err = c.pool.QueryRow(ctx, `SELECT holder, token FROM leases WHERE name = $1`, l.Name).Scan(&holder, &token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("postgres: release %q as %q (token %d): %w: no such lease", l.Name, l.Holder, l.Token, switchboard.ErrLeaseLost)
	case err != nil:
		return c.wrap("release", err)
	case token == l.Token && holder == "":
		return nil
	}
	return fmt.Errorf("postgres: release %q as %q (token %d): %w: now held by %q with token %d",
		l.Name, l.Holder, l.Token, switchboard.ErrLeaseLost, holder, token)
}

// Leases lists every lease row by name.
func (c *Catalog) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, `SELECT `+leaseCols+` FROM leases ORDER BY name`)
	if err != nil {
		return nil, c.wrap("leases", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.Lease, error) { return scanLease(r) })
	if err != nil {
		return nil, c.wrap("leases", err)
	}
	return out, nil
}

// dropOldLeases deletes the lease rows released or expired more than
// c.keepLeases ago. First it raises the floor new leases start above to the
// highest token such rows hold, in a transaction of its own; then it
// deletes only rows a minute older still, whose tokens an earlier reap's
// floor already covers when reaps run at least once a minute. So an
// Acquire that inserts a name whose row was just deleted reads a floor
// above the token it had, even when its statement began before the
// deletion: fencing tokens never go back.
func (c *Catalog) dropOldLeases(ctx context.Context) error {
	keep := c.keepLeases
	if _, err := c.pool.Exec(ctx, `UPDATE change_log SET lease_token_floor = greatest(lease_token_floor,
			(SELECT max(token) FROM leases WHERE expires_at < now() - $1::interval))
		WHERE EXISTS (SELECT 1 FROM leases WHERE expires_at < now() - $1::interval)`, keep); err != nil {
		return err
	}
	_, err := c.pool.Exec(ctx, `DELETE FROM leases WHERE expires_at < now() - $1::interval - interval '1 minute'
		AND token <= (SELECT lease_token_floor FROM change_log)`, keep)
	return err
}
