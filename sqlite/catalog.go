package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/jsonfast"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// instanceCols are the columns scanInstance reads, in order.
const instanceCols = `i.id, i.name, i.type, i.address, i.capabilities, i.version, i.metadata, i.components, i.ttl_ms, i.registered_at, i.last_seen, i.revision, ` + trafficCols

// row is an instance as stored.
type row struct {
	id, name, typ, address, caps, version, metadata string
	components                                      sql.NullString
	ttlMS, registeredAt, lastSeen                   int64
	revision                                        int64 // the change-log seq that last wrote the row
	traffic
}

type scanner interface{ Scan(dest ...any) error }

// scanRow scans the columns of instanceCols, after the leading columns
// that go into before.
func scanRow(s scanner, before ...any) (row, error) {
	var r row
	err := s.Scan(append(before, &r.id, &r.name, &r.typ, &r.address, &r.caps, &r.version, &r.metadata,
		&r.components, &r.ttlMS, &r.registeredAt, &r.lastSeen, &r.revision,
		&r.weight, &r.zone, &r.draining, &r.check, &r.healthStatus, &r.healthOutput, &r.healthSince)...)
	return r, err
}

// instance decodes r; now (µs, catalog clock) decides Stale. Metadata in
// another form than this package writes is read as
// storedmeta.Read says, a check as backend.ReadCheck says, and either is
// logged through ml (nil: not logged).
func (r row) instance(now int64, ml *storedmeta.Log) (switchboard.Instance, error) {
	in := switchboard.Instance{
		ID: r.id, Name: r.name, Type: r.typ, Address: r.address, Version: r.version,
		TTL:          time.Duration(r.ttlMS) * time.Millisecond,
		RegisteredAt: time.UnixMicro(r.registeredAt).UTC(),
		LastSeen:     time.UnixMicro(r.lastSeen).UTC(),
		Stale:        now-r.lastSeen > r.ttlMS*1000,
		Revision:     r.revision,
	}
	var err error
	if in.Capabilities, err = jsonfast.Strings(r.caps); err != nil {
		return in, fmt.Errorf("instance %q: capabilities: %w", r.id, err)
	}
	in.Metadata = ml.Decode(r.id, r.metadata)
	if r.components.Valid {
		in.Components = json.RawMessage(r.components.String)
	}
	r.traffic.decode(&in, ml)
	return in, nil
}

// sameContent reports whether r and s differ in nothing but their times.
func (r row) sameContent(s row) bool {
	return r.name == s.name && r.typ == s.typ && r.address == s.address && r.caps == s.caps &&
		r.version == s.version && r.metadata == s.metadata && r.components == s.components &&
		r.ttlMS == s.ttlMS && r.weight == s.weight && r.zone == s.zone && r.check == s.check
}

// encode turns a normalized instance into its stored form.
func (c *Catalog) encode(in switchboard.Instance) (row, error) {
	caps, err := json.Marshal(in.Capabilities)
	if err != nil {
		return row{}, err
	}
	md := in.Metadata
	if md == nil {
		md = map[string]string{}
	}
	mdj, err := json.Marshal(md) // keys sorted: a stable form to compare
	if err != nil {
		return row{}, err
	}
	// Whole milliseconds either way: Normalize rounded in.TTL, Open the
	// default (millis.Round).
	ttl := in.TTL
	if ttl == 0 {
		ttl = c.opts.DefaultTTL
	}
	r := row{
		id: in.ID, name: in.Name, typ: in.Type, address: in.Address, caps: string(caps),
		version: in.Version, metadata: string(mdj), ttlMS: ttl.Milliseconds(),
	}
	if len(bytes.TrimSpace(in.Components)) > 0 {
		r.components = sql.NullString{String: string(in.Components), Valid: true}
	}
	if err := r.traffic.encode(in); err != nil {
		return row{}, err
	}
	return r, nil
}

// clock reads the catalog clock (µs) inside tx.
func clock(ctx context.Context, tx *txn) (int64, error) {
	var now int64
	err := tx.QueryRowContext(ctx, `SELECT `+nowSQL).Scan(&now)
	return now, err
}

// logChange appends one entry to the change log and returns its sequence
// number. (The group that ran the write trims the log when due.)
func logChange(ctx context.Context, tx *txn, now int64, id, op string, reason switchboard.Reason) (int64, error) {
	res, err := tx.ExecContext(ctx,
		`INSERT INTO changes (id, op, reason, at) VALUES (?, ?, ?, ?)`, id, op, string(reason), now)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// Register validates and upserts in; see switchboard.Catalog. Re-registering
// identical content only renews last_seen (a heartbeat: no change-log entry
// unless the row was stale); any other difference is logged as an upsert in
// the same transaction. Concurrent writes of this handle share one
// transaction (see writeQueue).
func (c *Catalog) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	n, err := switchboard.Normalize(in)
	if err != nil {
		return switchboard.Instance{}, err
	}
	if err := backend.ValidateTTL(n.TTL, c.opts.MaxTTL); err != nil {
		return switchboard.Instance{}, err
	}
	if n.ID == "" {
		n.ID = c.ids.Next()
	}
	if c.closed.Load() {
		return switchboard.Instance{}, errClosed(fmt.Sprintf("register %q", n.ID))
	}
	want, err := c.encode(n)
	if err != nil {
		return switchboard.Instance{}, fmt.Errorf("sqlite: register %q: %w", n.ID, err)
	}
	var out switchboard.Instance
	err = c.group(ctx, func(ctx context.Context, tx *txn, now int64) ([]hub.Change, error) {
		var seq int64 // the change-log entry this write made, if any
		w := want
		// A new row is the common case: one statement tells.
		w.traffic.fresh(now)
		res, err := tx.ExecContext(ctx, `INSERT INTO instances
			(id, name, type, address, capabilities, version, metadata, components, ttl_ms, registered_at, last_seen, packed,
			 weight, zone, check_spec, health_status, health_output, health_since, schema_version)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
				json_array(?1, ?2, ?3, ?4, json(?5), ?6, json(?7), ?9, ?10), ?12, ?13, ?14, ?15, ?16, ?17, ?18) ON CONFLICT (id) DO NOTHING`,
			w.id, w.name, w.typ, w.address, w.caps, w.version, w.metadata,
			w.components, w.ttlMS, now, now, w.weight, w.zone, w.check, w.healthStatus, w.healthOutput, w.healthSince, len(migrations))
		if err != nil {
			return nil, err
		}
		inserted, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		if inserted == 1 {
			if err := insertCaps(ctx, tx, w.id, w.caps); err != nil {
				return nil, err
			}
			if seq, err = logChange(ctx, tx, now, w.id, "upsert", ""); err != nil {
				return nil, err
			}
			w.registeredAt = now
			w.revision = seq
		} else if seq, err = reRegister(ctx, tx, now, &w); err != nil {
			return nil, err
		}
		w.lastSeen = now
		out = registered(n, w)
		if seq == 0 {
			return nil, nil
		}
		return []hub.Change{{Seq: seq, ID: n.ID, Instance: out, Found: true, At: time.UnixMicro(now).UTC()}}, nil
	})
	if err != nil {
		return switchboard.Instance{}, fmt.Errorf("sqlite: register %q: %w", n.ID, err)
	}
	return out, nil
}

// reRegister updates the existing row of want.id (whose traffic state is
// a new row's: traffic.fresh): only last_seen when the content is the
// same, everything otherwise (logged as an upsert); the draining state and
// the check's health stay as stored (see traffic.keep). It returns the change-log entry it wrote (0: none), and
// sets want's registered_at, revision and kept traffic state as stored
// afterwards.
func reRegister(ctx context.Context, tx *txn, now int64, want *row) (seq int64, err error) {
	old, err := scanRow(tx.QueryRowContext(ctx, `SELECT `+instanceCols+` FROM instances i WHERE i.id = ?`, want.id))
	if err != nil {
		return 0, err
	}
	want.traffic.keep(old.traffic)
	want.registeredAt = old.registeredAt
	seq, want.revision, err = reRegisterRow(ctx, tx, now, *want, old)
	return seq, err
}

func reRegisterRow(ctx context.Context, tx *txn, now int64, want, old row) (seq, revision int64, err error) {
	if old.sameContent(want) {
		// A row (nearly) stale is logged by the instances_revived trigger,
		// which gives it a new revision (changes_revision).
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET last_seen = ?, schema_version = ? WHERE id = ?`, now, len(migrations), want.id); err != nil {
			return 0, 0, err
		}
		revision = old.revision
		if now-old.lastSeen > old.ttlMS*800 {
			err = tx.QueryRowContext(ctx, `SELECT revision FROM instances WHERE id = ?`, want.id).Scan(&revision)
		}
		return 0, revision, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE instances SET
		name = ?1, type = ?2, address = ?3, capabilities = ?4, version = ?5, metadata = ?6,
		components = ?7, ttl_ms = ?8, last_seen = ?9,
		packed = json_array(?10, ?1, ?2, ?3, json(?4), ?5, json(?6), ?8, ?11),
		weight = ?12, zone = ?13, check_spec = ?14, health_status = ?15, health_output = ?16, health_since = ?17,
		schema_version = ?18 WHERE id = ?10`,
		want.name, want.typ, want.address, want.caps, want.version, want.metadata,
		want.components, want.ttlMS, now, want.id, old.registeredAt,
		want.weight, want.zone, want.check, want.healthStatus, want.healthOutput, want.healthSince, len(migrations)); err != nil {
		return 0, 0, err
	}
	if old.caps != want.caps {
		if _, err := tx.ExecContext(ctx, `DELETE FROM instance_capabilities WHERE instance_id = ?`, want.id); err != nil {
			return 0, 0, err
		}
		if err := insertCaps(ctx, tx, want.id, want.caps); err != nil {
			return 0, 0, err
		}
	}
	// A row (nearly) stale was logged by the instances_revived trigger.
	if now-old.lastSeen <= old.ttlMS*800 {
		if seq, err = logChange(ctx, tx, now, want.id, "upsert", ""); err != nil {
			return 0, 0, err
		}
		return seq, seq, nil
	}
	err = tx.QueryRowContext(ctx, `SELECT revision FROM instances WHERE id = ?`, want.id).Scan(&revision)
	return seq, revision, err
}

// registered is the instance Register stored: n (normalized) with the
// stored TTL and times of w, as reading the row back would decode it.
func registered(n switchboard.Instance, w row) switchboard.Instance {
	out := n
	out.TTL = time.Duration(w.ttlMS) * time.Millisecond
	out.RegisteredAt = time.UnixMicro(w.registeredAt).UTC()
	out.LastSeen = time.UnixMicro(w.lastSeen).UTC()
	out.Revision = w.revision
	out.Stale = false
	if out.Capabilities == nil {
		out.Capabilities = []string{}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	out.Components = nil
	if w.components.Valid {
		out.Components = json.RawMessage(w.components.String)
	}
	w.traffic.state(&out)
	return out
}

// insertCaps adds the capability rows of id, given as the JSON array it
// stores, in one statement.
func insertCaps(ctx context.Context, tx *txn, id, caps string) error {
	if caps == "[]" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO instance_capabilities (instance_id, capability)
		SELECT ?, value FROM json_each(?)`, id, caps)
	return err
}

// Heartbeat renews last_seen of every id in one statement and returns the
// ids that have no row. A renewal writes no change-log entry, except for a
// row that was stale or within the last fifth of its TTL: its return is
// logged as an upsert (by the instances_revived trigger), so that watchers
// that expired it add it back at once. Concurrent writes of this handle
// share one transaction (see writeQueue).
func (c *Catalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if err := backend.ValidateHeartbeatIDs(ids); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, errClosed("heartbeat")
	}
	seen := make(map[string]struct{}, len(ids))
	uniq := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			uniq = append(uniq, id)
		}
	}
	list, err := json.Marshal(uniq)
	if err != nil {
		return nil, fmt.Errorf("sqlite: heartbeat: %w", err)
	}
	var missing []string
	err = c.group(ctx, func(ctx context.Context, tx *txn, now int64) ([]hub.Change, error) {
		missing = nil
		// OR FAIL: no constraint of this update can fail, and with the
		// default ABORT SQLite would still copy every page the statement
		// changes into a statement journal first, to undo the statement
		// alone (a quarter of a heartbeat's CPU; BenchmarkHeartbeat10k:
		// 6.9 → 5.2 µs an id). An error fails the whole transaction, or, in
		// a group, rolls back the op's savepoint, as before.
		res, err := tx.ExecContext(ctx, `UPDATE OR FAIL instances SET last_seen = ?
			WHERE id IN (SELECT value FROM json_each(?))`, now, string(list))
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil || n == int64(len(uniq)) {
			return nil, err
		}
		rows, err := tx.QueryContext(ctx, `SELECT j.value FROM json_each(?) j
			WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = j.value) ORDER BY j.key`, string(list))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			missing = append(missing, id)
		}
		return nil, rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: heartbeat %d ids: %w", len(uniq), err)
	}
	return missing, nil
}

// Deregister deletes the row of id and logs its removal with reason
// "deregistered"; switchboard.ErrNotFound when there is none. Concurrent
// writes of this handle share one transaction (see writeQueue).
func (c *Catalog) Deregister(ctx context.Context, id string) error {
	return c.remove(ctx, "deregister", id, switchboard.ReasonDeregistered)
}

// Remove implements switchboard.Remover: Deregister with reason logged as
// the removal's.
func (c *Catalog) Remove(ctx context.Context, id string, reason switchboard.Reason) error {
	if err := backend.ValidateRemoval(reason); err != nil {
		return err
	}
	return c.remove(ctx, "remove", id, reason)
}

func (c *Catalog) remove(ctx context.Context, op, id string, reason switchboard.Reason) error {
	if c.closed.Load() {
		return errClosed(fmt.Sprintf("%s %q", op, id))
	}
	err := c.group(ctx, func(ctx context.Context, tx *txn, now int64) ([]hub.Change, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM instances WHERE id = ?`, id)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = switchboard.ErrNotFound
			}
			return nil, err
		}
		seq, err := logChange(ctx, tx, now, id, "delete", reason)
		if err != nil {
			return nil, err
		}
		return []hub.Change{{Seq: seq, ID: id, Deleted: true, Reason: reason,
			At: time.UnixMicro(now).UTC()}}, nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: %s %q: %w", op, id, err)
	}
	return nil
}

// Get returns the instance id, stale or not; switchboard.ErrNotFound when
// there is none.
func (c *Catalog) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	if c.closed.Load() {
		return switchboard.Instance{}, errClosed(fmt.Sprintf("get %q", id))
	}
	var out switchboard.Instance
	err := c.read(ctx, func(tx *txn) error {
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		r, err := scanRow(tx.QueryRowContext(ctx, `SELECT `+instanceCols+` FROM instances i WHERE i.id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return switchboard.ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = r.instance(now, &c.md)
		return err
	})
	if err != nil {
		return switchboard.Instance{}, fmt.Errorf("sqlite: get %q: %w", id, err)
	}
	return out, nil
}

// List returns the instances selected by q, ordered by name then id (see
// queryInstances). The capability filter goes through the capability
// index; staleness is judged by the catalog clock.
func (c *Catalog) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	if c.closed.Load() {
		return nil, errClosed("list")
	}
	var out []switchboard.Instance
	err := c.read(ctx, func(tx *txn) error {
		out = nil
		now, err := clock(ctx, tx)
		if err != nil {
			return err
		}
		query := `SELECT ` + packedCols + ` FROM instances i`
		var args []any
		if q.Capability != "" {
			query += ` JOIN instance_capabilities ic ON ic.instance_id = i.id AND ic.capability = ?`
			args = append(args, q.Capability)
		}
		query += ` WHERE 1`
		if q.Name != "" {
			query += ` AND i.name = ?`
			args = append(args, q.Name)
		}
		if q.Type != "" {
			query += ` AND i.type = ?`
			args = append(args, q.Type)
		}
		if !q.All {
			query += ` AND ? - i.last_seen <= i.ttl_ms * 1000 AND i.health_status <> 'critical'`
			args = append(args, now)
		}
		out, err = queryInstances(ctx, tx, nil, &c.md, now, 0, query, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list: %w", err)
	}
	return out, nil
}

// Reap deletes the rows whose last_seen is older than olderThan (zero:
// older than twice their own TTL) and logs each removal with reason
// "expired". It returns how many rows it deleted.
func (c *Catalog) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("sqlite: reap: %w: negative age %s", switchboard.ErrInvalid, olderThan)
	}

	if olderThan > 0 {
		return c.reap(ctx, olderCond, func(now int64) []any { return []any{now - olderThan.Microseconds()} })
	}
	return c.reap(ctx, staleCond, func(now int64) []any { return []any{now} })
}

// Now returns the catalog's (SQLite's) clock.
func (c *Catalog) Now(ctx context.Context) (time.Time, error) {
	if c.closed.Load() {
		return time.Time{}, errClosed("now")
	}
	var now int64
	d, done := c.opening(ctx)
	err := c.retry(ctx, func() error {
		return d.rdb.QueryRowContext(ctx, `SELECT `+nowSQL).Scan(&now)
	})
	done()
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: now: %w", err)
	}
	return time.UnixMicro(now).UTC(), nil
}
