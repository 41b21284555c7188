package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// The traffic state of a row (migration 7): weight, zone and check_spec
// are written by Register; draining only by Drain; health_status,
// health_output and health_since by SetHealth (and by Register when the
// row does not keep a check, as backend.KeepsHealth says: a new row or a
// check added starts critical, a check removed clears the health). Drain and SetHealth log
// their change as an upsert, exactly as a registration that changed the
// row: the entry's trigger gives the row its new revision, and watchers in
// every process hear of it the same way.

var (
	_ switchboard.Drainer      = (*Catalog)(nil)
	_ switchboard.HealthSetter = (*Catalog)(nil)
)

// Drain sets or clears the instance's draining state; see
// switchboard.Drainer. Setting the state the row has writes nothing.
func (c *Catalog) Drain(ctx context.Context, id string, draining bool) (switchboard.Instance, error) {
	if err := c.check(); err != nil {
		return switchboard.Instance{}, err
	}
	return c.setTraffic(ctx, "drain", id, `draining = $2::boolean`, `draining IS DISTINCT FROM $2::boolean`, draining)
}

// SetHealth records a check's result; see switchboard.HealthSetter. The
// output is stored as backend.ValidateHealth gives it; health_since is the
// database clock when the status changes; the same status and output
// again writes nothing.
func (c *Catalog) SetHealth(ctx context.Context, id string, h switchboard.Health) (switchboard.Instance, error) {
	if err := c.check(); err != nil {
		return switchboard.Instance{}, err
	}
	h, err := backend.ValidateHealth(h)
	if err != nil {
		return switchboard.Instance{}, err
	}
	return c.setTraffic(ctx, "set health", id,
		`health_since = CASE WHEN health_status = $2::text AND health_since IS NOT NULL THEN health_since ELSE now() END,
		health_status = $2::text, health_output = $3::text`,
		`(health_status, health_output) IS DISTINCT FROM ($2::text, $3::text)`,
		string(h.Status), h.Output)
}

// setTraffic applies set (SET expressions, parameters from $2: args) to
// the row of id where cond holds, logs the change, and returns the row. In
// one round trip, as Register's: a pipelined batch, one transaction, then
// the notification (notifySQL). The update takes the row lock (so it is
// ordered with registrations and deregistrations of the id) and marks, in
// a transaction-local setting, that it changed the row; only then is the
// entry logged and notified (logEntrySQL), and the row read back at its
// new revision.
func (c *Catalog) setTraffic(ctx context.Context, op, id, set, cond string, args ...any) (switchboard.Instance, error) {
	notFound := fmt.Errorf("postgres: %s: instance %q: %w", op, id, switchboard.ErrNotFound)
	if !storable(id) {
		return switchboard.Instance{}, notFound
	}
	const changed = `current_setting('switchboard.traffic', true) = 'yes'`
	params := append([]any{id}, args...)
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(resetNoticeSQL)
	b.Queue(`UPDATE instances SET `+set+` WHERE id = $1 AND `+cond+`
		RETURNING set_config('switchboard.traffic', 'yes', true)`, params...)
	b.Queue(logEntrySQL(`INSERT INTO changes (id, op) SELECT $1, 'upsert' WHERE `+changed), id)
	b.Queue(`SELECT `+cols+` FROM instances WHERE id = $1`, id)
	b.Queue(`COMMIT`)
	b.Queue(notifySQL, Channel)

	var (
		r       row
		l       logged
		epoch   string
		written bool
	)
	br := c.pool.SendBatch(ctx, &b)
	var err error
	for range 3 { // BEGIN, resetNoticeSQL, UPDATE
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&l.seq, &l.at, &epoch, nil)
		written = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(r.dest()...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Instance{}, notFound
	}
	if err != nil {
		return switchboard.Instance{}, c.wrap(fmt.Sprintf("%s %q", op, id), err)
	}
	out, err := r.instance(&c.md)
	if err != nil {
		return switchboard.Instance{}, c.wrap(op, err)
	}
	if written {
		if c.writes.Add(1)%trimEvery == 0 {
			c.trimNow(ctx)
		}
		c.publish([]hub.Change{{ID: id, Instance: out, Found: true, Seq: l.seq}}, l.at, epoch)
	}
	return out, nil
}

// newHealthSQL is the health of a new row (health_status, health_output,
// health_since), its check $12: with one, critical since now until its
// first probes pass; without, none.
const newHealthSQL = `CASE WHEN $12::jsonb IS NULL THEN '' ELSE 'critical' END,
	CASE WHEN $12::jsonb IS NULL THEN '' ELSE '` + backend.NotCheckedYet + `' END,
	CASE WHEN $12::jsonb IS NULL THEN NULL ELSE now() END`

// keptHealthSQL sets the health of a re-registered row as
// backend.KeepsHealth says: kept while the row keeps a check (only
// SetHealth writes it), otherwise a new row's (EXCLUDED's, newHealthSQL):
// a check added starts critical, and one removed takes its health with it.
// Draining is never set here.
const keptHealthSQL = `health_status = CASE WHEN ` + keepsHealthSQL + ` THEN instances.health_status ELSE EXCLUDED.health_status END,
	health_output = CASE WHEN ` + keepsHealthSQL + ` THEN instances.health_output ELSE EXCLUDED.health_output END,
	health_since = CASE WHEN ` + keepsHealthSQL + ` THEN instances.health_since ELSE EXCLUDED.health_since END`

const keepsHealthSQL = `(instances.check_spec IS NOT NULL AND EXCLUDED.check_spec IS NOT NULL)`

// healthStatus is a stored health_status: one of the statuses' own
// constants (no allocation), or the text as stored.
func healthStatus(s string) switchboard.Status {
	switch s {
	case "":
		return ""
	case string(switchboard.StatusPassing):
		return switchboard.StatusPassing
	case string(switchboard.StatusWarning):
		return switchboard.StatusWarning
	case string(switchboard.StatusCritical):
		return switchboard.StatusCritical
	}
	return switchboard.Status(s)
}
