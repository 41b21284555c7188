package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// trafficCols are the traffic state's columns (migration 9), in the order
// traffic.dest scans them.
const trafficCols = `i.weight, i.zone, i.draining, i.check_spec, i.health_status, i.health_output, i.health_since`

// traffic is a row's traffic state as stored.
type traffic struct {
	weight       int64
	zone         string
	draining     bool
	check        sql.NullString // the check's JSON
	healthStatus string
	healthOutput string
	healthSince  sql.NullInt64 // µs, catalog clock
}

func (t *traffic) dest() []any {
	return []any{&t.weight, &t.zone, &t.draining, &t.check, &t.healthStatus, &t.healthOutput, &t.healthSince}
}

// encode stores what a registration says of traffic: weight, zone and check
// (in is normalized).
func (t *traffic) encode(in switchboard.Instance) error {
	t.weight, t.zone = int64(in.Weight), in.Zone
	if in.Check != nil {
		b, err := json.Marshal(in.Check)
		if err != nil {
			return err
		}
		t.check = sql.NullString{String: string(b), Valid: true}
	}
	return nil
}

// fresh sets the state of a new row: not draining; a check starts critical
// until a runner judges it, as Consul's do.
func (t *traffic) fresh(now int64) {
	t.draining = false
	t.healthStatus, t.healthOutput, t.healthSince = "", "", sql.NullInt64{}
	if t.check.Valid {
		t.healthStatus, t.healthOutput = string(switchboard.StatusCritical), backend.NotCheckedYet
		t.healthSince = sql.NullInt64{Int64: now, Valid: true}
	}
}

// keep carries over, onto t set by fresh, what a re-registration does not
// write: the draining state, and the health as backend.KeepsHealth says
// (kept while the row keeps a check; otherwise fresh's).
func (t *traffic) keep(old traffic) {
	t.draining = old.draining
	if backend.KeepsHealth(old.check.Valid, t.check.Valid) {
		t.healthStatus, t.healthOutput, t.healthSince = old.healthStatus, old.healthOutput, old.healthSince
	}
}

// state fills in's traffic fields from t but its check.
func (t *traffic) state(in *switchboard.Instance) {
	in.Weight, in.Zone, in.Draining = int(t.weight), t.zone, t.draining
	in.Health = switchboard.Health{Status: switchboard.Status(t.healthStatus), Output: t.healthOutput}
	if t.healthSince.Valid {
		in.Health.Since = time.UnixMicro(t.healthSince.Int64).UTC()
	}
}

// decode fills in's traffic fields from t, the check included (a check
// another tool wrote that does not read as one is read as none and noted
// through ml: backend.ReadCheck).
func (t *traffic) decode(in *switchboard.Instance, ml *storedmeta.Log) {
	t.state(in)
	in.Check = nil
	if t.check.Valid {
		in.Check = backend.ReadCheck(in.ID, []byte(t.check.String), ml)
	}
}

// Drain sets or clears the draining state of id: one change-log entry (an
// upsert, a new revision) when it changes, nothing when it is already so.
func (c *Catalog) Drain(ctx context.Context, id string, draining bool) (switchboard.Instance, error) {
	out, err := c.setTraffic(ctx, id, func(t *traffic, now int64) bool {
		if t.draining == draining {
			return false
		}
		t.draining = draining
		return true
	})
	if err != nil {
		return switchboard.Instance{}, fmt.Errorf("sqlite: drain %q: %w", id, err)
	}
	return out, nil
}

// SetHealth records a check's result for id: one change-log entry when the
// status or the output changes (Since moves only with the status).
func (c *Catalog) SetHealth(ctx context.Context, id string, h switchboard.Health) (switchboard.Instance, error) {
	h, err := backend.ValidateHealth(h)
	if err != nil {
		return switchboard.Instance{}, err
	}
	out, err := c.setTraffic(ctx, id, func(t *traffic, now int64) bool {
		if t.healthStatus == string(h.Status) && t.healthOutput == h.Output {
			return false
		}
		if t.healthStatus != string(h.Status) || !t.healthSince.Valid {
			t.healthSince = sql.NullInt64{Int64: now, Valid: true}
		}
		t.healthStatus, t.healthOutput = string(h.Status), h.Output
		return true
	})
	if err != nil {
		return switchboard.Instance{}, fmt.Errorf("sqlite: set health of %q: %w", id, err)
	}
	return out, nil
}

// setTraffic reads id's row, lets change modify its traffic state, and
// writes it with a change-log entry when change says it changed. An id
// with no row (an invalid one included, as Deregister has it) is
// switchboard.ErrNotFound.
func (c *Catalog) setTraffic(ctx context.Context, id string, change func(t *traffic, now int64) bool) (switchboard.Instance, error) {
	if c.closed.Load() {
		return switchboard.Instance{}, errClosed(fmt.Sprintf("update %q", id))
	}
	var out switchboard.Instance
	err := c.group(ctx, func(ctx context.Context, tx *txn, now int64) ([]hub.Change, error) {
		r, err := scanRow(tx.QueryRowContext(ctx, `SELECT `+instanceCols+` FROM instances i WHERE i.id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, switchboard.ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if !change(&r.traffic, now) {
			out, err = r.instance(now, &c.md)
			return nil, err
		}
		t := r.traffic
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET draining = ?, health_status = ?, health_output = ?, health_since = ?
			WHERE id = ?`, t.draining, t.healthStatus, t.healthOutput, t.healthSince, id); err != nil {
			return nil, err
		}
		seq, err := logChange(ctx, tx, now, id, "upsert", "")
		if err != nil {
			return nil, err
		}
		r.revision = seq
		if out, err = r.instance(now, &c.md); err != nil {
			return nil, err
		}
		return []hub.Change{{Seq: seq, ID: id, Instance: out, Found: true, At: time.UnixMicro(now).UTC()}}, nil
	})
	return out, err
}
