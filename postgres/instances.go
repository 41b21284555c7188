package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/millis"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// cols is the instance row as every read returns it; stale is judged by the
// database clock. The traffic state (migration 7) follows the revision.
const cols = `id, name, type, address, capabilities, version, metadata, components::text, ttl,
	registered_at, last_seen, (now() - last_seen > ttl) AS stale, revision,
	weight, zone, draining, check_spec, health_status, health_output, health_since`

// colCount is how many columns cols has.
const colCount = 20

// row holds one scanned instance row.
type row struct {
	in           switchboard.Instance
	metadata     []byte
	components   *string
	checkSpec    []byte
	healthStatus string
	healthSince  *time.Time
}

func (r *row) dest() []any {
	return []any{&r.in.ID, &r.in.Name, &r.in.Type, &r.in.Address, &r.in.Capabilities, &r.in.Version,
		&r.metadata, &r.components, &r.in.TTL, &r.in.RegisteredAt, &r.in.LastSeen, &r.in.Stale, &r.in.Revision,
		&r.in.Weight, &r.in.Zone, &r.in.Draining, &r.checkSpec, &r.healthStatus, &r.in.Health.Output, &r.healthSince}
}

// instance decodes r; metadata another tool wrote in another form is read
// as storedmeta.Read says, and logged through ml (nil: not).
// The TTL is reported in whole milliseconds (readTTL).
func (r *row) instance(ml *storedmeta.Log) (switchboard.Instance, error) {
	in := r.in
	in.TTL = readTTL(in.TTL)
	in.Metadata = nil
	if len(r.metadata) > 0 && !bytes.Equal(r.metadata, []byte("{}")) {
		in.Metadata = ml.Decode(in.ID, string(r.metadata))
	}
	if r.components != nil {
		in.Components = json.RawMessage(*r.components)
	}
	if in.Capabilities == nil {
		in.Capabilities = []string{}
	}
	in.RegisteredAt = in.RegisteredAt.UTC()
	in.LastSeen = in.LastSeen.UTC()
	in.Check = backend.ReadCheck(in.ID, r.checkSpec, ml)
	in.Health.Status = healthStatus(r.healthStatus)
	in.Health.Since = time.Time{}
	if r.healthSince != nil {
		in.Health.Since = r.healthSince.UTC()
	}
	return in, nil
}

// readTTL is a stored TTL as every read reports it: rounded up to whole
// milliseconds (millis.Round), as Register stores TTLs. A row an
// older version registered keeps microseconds until it is registered
// again; its reads still show the TTL every backend would store for it.
// (The database judges staleness and reaping by the TTL stored, which is
// less than a millisecond shorter.)
func readTTL(ttl time.Duration) time.Duration { return millis.Round(ttl) }

func scanInstance(s pgx.Row, ml *storedmeta.Log) (switchboard.Instance, error) {
	var r row
	if err := s.Scan(r.dest()...); err != nil {
		return switchboard.Instance{}, err
	}
	return r.instance(ml)
}

// params are the stored fields of a normalized instance, in the order of
// the insert and compare statements ($1…$12): the check as its JSON form
// (NULL without one).
func params(in switchboard.Instance) ([]any, error) {
	md := in.Metadata
	if md == nil {
		md = map[string]string{}
	}
	mdJSON, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	var comp any
	if len(in.Components) > 0 {
		comp = string(in.Components)
	}
	var check any
	if in.Check != nil {
		b, err := json.Marshal(*in.Check)
		if err != nil {
			return nil, err
		}
		check = string(b)
	}
	return []any{in.ID, in.Name, in.Type, in.Address, in.Capabilities, in.Version, string(mdJSON), comp, in.TTL,
		in.Weight, in.Zone, check}, nil
}

// renewUnchangedSQL renews the row of id $1 when it holds exactly $2 … $12
// (params' order) and is live, and marks in a transaction-local setting
// that it did. Only id may lead its plan: the other columns are compared as
// one row, which no index serves. Compared one by one, they let a cached
// generic plan, made while the table's statistics were still those of an
// empty table, walk the name index instead of the primary key — every
// replica of the service and every dead entry of one not yet vacuumed, on
// each registration (measured: 0.1–0.2 ms more per Register with 2,400
// rows of one name, about 1 ms with 10,000–16,000).
const renewUnchangedSQL = `UPDATE instances SET last_seen = now(), schema_version = $13
		WHERE id = $1
		  AND (name, type, address, capabilities, version, metadata, components::text, ttl, weight, zone, check_spec)
		      IS NOT DISTINCT FROM ($2::text, $3::text, $4::text, $5::text[], $6::text, $7::jsonb, $8::text, $9::interval,
		          $10::integer, $11::text, $12::jsonb)
		  AND ` + liveSQL + `
		RETURNING ` + cols + `, set_config('switchboard.renewed', 'yes', true)`

// Register validates and upserts in; see switchboard.Catalog. It stores the
// weight, zone and check, never Draining or Health: a new row with a check
// starts critical, "not checked yet"; a re-registration keeps the stored
// draining state, and the health while the row keeps a check (one added
// starts as on a new row, one removed clears it: backend.KeepsHealth,
// newHealthSQL, keptHealthSQL). A change-log
// entry (and a NOTIFY) is written only when something other than last_seen
// changed, or when the row had gone stale (or nearly: the same margin as
// Heartbeat's) so this registration revives it: watchers that saw it expire
// must see it come back at once.
func (c *Catalog) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	if err := c.check(); err != nil {
		return switchboard.Instance{}, err
	}
	in, err := switchboard.Normalize(in)
	if err != nil {
		return switchboard.Instance{}, err
	}
	if err := backend.ValidateTTL(in.TTL, c.opts.MaxTTL); err != nil {
		return switchboard.Instance{}, err
	}
	if in.Check != nil && strings.IndexByte(in.Check.Body, 0) >= 0 {
		// Valid UTF-8, but jsonb cannot hold the \u0000 it is written as.
		return switchboard.Instance{}, switchboard.NewFieldError(switchboard.ErrInvalid, "check.body", in.Check.Body,
			"must not hold a NUL byte")
	}
	if in.ID == "" {
		in.ID = uuid.NewString()
	}
	// Whole milliseconds, as on every backend: Normalize rounded in.TTL,
	// Open the default (an interval keeps them exactly).
	if in.TTL == 0 {
		in.TTL = c.opts.DefaultTTL
	}
	args, err := params(in)
	if err != nil {
		return switchboard.Instance{}, c.wrap("register", err)
	}
	// $13: the schema this program knows, recorded on the row (see
	// olderWriters).
	known := len(migrations) - 1
	args = append(args, known)

	// One round trip: a pipelined batch, one transaction, then the
	// notification (notifySQL).
	// First, a re-registration of an unchanged, live instance only renews
	// it, and marks in a transaction-local setting that it did (a row that
	// had gone stale falls through, so its revival is logged). Otherwise
	// the upsert locks the row (the row lock orders registrations of one
	// id; a concurrent insert of the same new id waits for the first to
	// end, then conflicts); it changes the row unless the row holds exactly
	// this and is live by now (a concurrent identical registration), and
	// marks that it did. Only then is the entry logged and notified
	// (logEntrySQL); otherwise the last statement renews the row, so
	// identical concurrent registrations log once.
	const (
		renewed = `current_setting('switchboard.renewed', true) = 'yes'`
		changed = `current_setting('switchboard.registered', true) = 'yes'`
	)
	// A batch is built for each attempt: pgx keeps what it learnt of a
	// sent batch's statements in it.
	batch := func() *pgx.Batch {
		var b pgx.Batch
		b.Queue(`BEGIN`)
		b.Queue(resetNoticeSQL)
		b.Queue(renewUnchangedSQL, args...)
		b.Queue(`INSERT INTO instances
			(id, name, type, address, capabilities, version, metadata, components, ttl, registered_at, last_seen,
			 weight, zone, check_spec, health_status, health_output, health_since, schema_version)
			SELECT $1::text, $2::text, $3::text, $4::text, $5::text[], $6::text, $7::jsonb, $8::json, $9::interval, now(), now(),
				$10::integer, $11::text, $12::jsonb, `+newHealthSQL+`, $13::integer
			WHERE NOT coalesce(`+renewed+`, false)
			ON CONFLICT (id) DO UPDATE SET
				name = EXCLUDED.name, type = EXCLUDED.type, address = EXCLUDED.address,
				capabilities = EXCLUDED.capabilities, version = EXCLUDED.version,
				metadata = EXCLUDED.metadata, components = EXCLUDED.components,
				ttl = EXCLUDED.ttl, last_seen = now(),
				weight = EXCLUDED.weight, zone = EXCLUDED.zone, check_spec = EXCLUDED.check_spec,
				schema_version = EXCLUDED.schema_version,
				`+keptHealthSQL+`
			WHERE NOT (instances.name = EXCLUDED.name AND instances.type = EXCLUDED.type
				AND instances.address = EXCLUDED.address AND instances.capabilities = EXCLUDED.capabilities
				AND instances.version = EXCLUDED.version AND instances.metadata = EXCLUDED.metadata
				AND instances.components::text IS NOT DISTINCT FROM EXCLUDED.components::text
				AND instances.ttl = EXCLUDED.ttl AND instances.weight = EXCLUDED.weight AND instances.zone = EXCLUDED.zone
				AND instances.check_spec IS NOT DISTINCT FROM EXCLUDED.check_spec
				AND now() - instances.last_seen <= instances.ttl * 0.8)
			RETURNING `+cols+`, set_config('switchboard.registered', 'yes', true)`, args...)
		b.Queue(logEntrySQL(`INSERT INTO changes (id, op) SELECT $1, 'upsert' WHERE `+changed), in.ID)
		b.Queue(`UPDATE instances SET last_seen = now(), schema_version = $2
			WHERE id = $1 AND NOT coalesce(`+renewed+`, false) AND NOT coalesce(`+changed+`, false)
			RETURNING `+cols, in.ID, known)
		b.Queue(`COMMIT`)
		b.Queue(notifySQL, Channel)
		return &b
	}
	res, err := c.sendRegister(ctx, batch())
	if err != nil && c.recreate(ctx, err) {
		// A catalog restarted empty (its tables gone) is created again,
		// once, so that a registration does not stay out until a restart.
		res, err = c.sendRegister(ctx, batch())
	}
	if err != nil {
		return switchboard.Instance{}, c.wrap(fmt.Sprintf("register %q", in.ID), err)
	}
	if res.written {
		// The row was read back before its entry drew the seq that the
		// entry's trigger made its revision (migration 5).
		res.out.Revision = res.l.seq
		if c.writes.Add(1)%trimEvery == 0 {
			c.trimNow(ctx)
		}
		c.publish([]hub.Change{{ID: in.ID, Instance: res.out, Found: true, Seq: res.l.seq}}, res.l.at, res.epoch)
	}
	return res.out, nil
}

// registered is what one registration batch did: the stored instance, and,
// when it wrote (written), its log entry and the catalog's epoch.
type registered struct {
	out     switchboard.Instance
	l       logged
	epoch   string
	written bool
}

// sendRegister sends one registration batch (Register's) and reads its
// results.
func (c *Catalog) sendRegister(ctx context.Context, b *pgx.Batch) (res registered, err error) {
	var r row
	br := c.pool.SendBatch(ctx, b)
	for range 2 { // BEGIN, resetNoticeSQL
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(append(r.dest(), nil)...)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = br.QueryRow().Scan(append(r.dest(), nil)...)
		switch {
		case err == nil:
			res.written = true
			if err = br.QueryRow().Scan(&res.l.seq, &res.l.at, &res.epoch, nil); err == nil {
				_, err = br.Exec()
			}
		case errors.Is(err, pgx.ErrNoRows):
			// Identical and live by now: renewed by the last statement.
			if _, err = br.Exec(); err == nil {
				err = br.QueryRow().Scan(r.dest()...)
			}
		}
	}
	if err == nil {
		res.out, err = r.instance(&c.md)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// liveSQL holds for a row that is neither stale nor within the last fifth of
// its TTL: renewing it is not a change. Renewing any other row is a revival
// that must be logged (Register and Heartbeat use the same margin, since a
// watcher's estimate of the catalog clock may expire a row a little early).
const liveSQL = `now() - last_seen <= ttl * 0.8`

// Heartbeat renews last_seen of every id in one statement and returns the
// ids that have no row, in the order given. A heartbeat is not a change and
// writes no log entry, with one exception: a row that had gone stale (or
// was about to, within a fifth of its TTL) is logged as an upsert, because
// watchers that saw it expire must see it come back, and only the log (not
// the bulk renewal read) reaches them at once, in every process.
func (c *Catalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if err := backend.ValidateHeartbeatIDs(ids); err != nil {
		return nil, err
	}
	// Sorted and unique, so concurrent batches lock rows in one order.
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	type result struct {
		id   string
		late *bool // nil: no row
	}
	var res []result
	for attempt := 0; ; attempt++ {
		// SET expressions read the row being replaced: revived says whether
		// it had (nearly) gone stale. One pass, no index touched (HOT). The
		// commit does not wait for its WAL flush (synchronous_commit off
		// for this statement's transaction only, set by the
		// filter of every row it renews): a renewal lost in a
		// server crash is repeated by the next heartbeat, and a row lost
		// with it is reported missing, so bootstraps re-register it.
		rows, err := c.pool.Query(ctx, `WITH renewed AS (
				UPDATE instances SET last_seen = now(), revived = NOT (`+liveSQL+`)
				WHERE id = ANY($1::text[]) AND set_config('synchronous_commit', 'off', true) = 'off'
				RETURNING id, revived)
			SELECT x, r.revived FROM unnest($1::text[]) AS x LEFT JOIN renewed r ON r.id = x
			WHERE r.id IS NULL OR r.revived`, sorted)
		if err == nil {
			res, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (result, error) {
				var x result
				return x, r.Scan(&x.id, &x.late)
			})
		}
		if err == nil {
			break
		}
		if attempt < 3 && retryable(err) || attempt == 0 && c.recreate(ctx, err) {
			continue
		}
		return nil, c.wrap("heartbeat", err)
	}
	gone := make(map[string]bool)
	var revived []string
	for _, r := range res {
		if r.late == nil {
			gone[r.id] = true
		} else {
			revived = append(revived, r.id)
		}
	}
	if len(revived) > 0 {
		_, _, err := c.changeTx(ctx, func(tx pgx.Tx) (*logWrite, error) {
			return &logWrite{sql: `INSERT INTO changes (id, op)
				SELECT id, 'upsert' FROM instances WHERE id = ANY($1::text[]) ORDER BY id`, args: []any{revived}}, nil
		})
		if err != nil {
			return nil, c.wrap("heartbeat: log revived instances", err)
		}
		c.notify()
	}
	if len(gone) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(gone))
	for _, id := range ids {
		if gone[id] {
			out = append(out, id)
			delete(gone, id)
		}
	}
	return out, nil
}

// retryable reports a deadlock or serialization failure: the statement can
// simply run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// Deregister deletes the row and logs its removal as deregistered.
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
	if err := c.check(); err != nil {
		return err
	}
	if !storable(id) {
		return c.wrap(op, fmt.Errorf("instance %q: %w", id, switchboard.ErrNotFound))
	}
	// One round trip: a pipelined batch, one transaction, then the
	// notification (notifySQL). The delete
	// takes the row lock first (as Register does, so the two never
	// deadlock) and marks, in a transaction-local setting, whether it found
	// the row; only then is the entry logged and notified (logEntrySQL).
	const found = `current_setting('switchboard.deregistered', true) = 'yes'`
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(resetNoticeSQL)
	b.Queue(`DELETE FROM instances WHERE id = $1 RETURNING set_config('switchboard.deregistered', 'yes', true)`, id)
	b.Queue(logEntrySQL(`INSERT INTO changes (id, op, reason) SELECT $1, 'delete', $2 WHERE `+found),
		id, string(reason))
	b.Queue(`COMMIT`)
	b.Queue(notifySQL, Channel)
	var (
		l     logged
		epoch string
	)
	br := c.pool.SendBatch(ctx, &b)
	var err error
	for range 3 { // BEGIN, resetNoticeSQL, DELETE
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&l.seq, &l.at, &epoch, nil)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return c.wrap(op, fmt.Errorf("instance %q: %w", id, switchboard.ErrNotFound))
	}
	if err != nil {
		return c.wrap(op, err)
	}
	c.publish([]hub.Change{{ID: id, Deleted: true, Reason: reason,
		Instance: switchboard.Instance{ID: id}, Seq: l.seq}}, l.at, epoch)
	return nil
}

// Get returns one instance, stale or not.
func (c *Catalog) Get(ctx context.Context, id string) (in switchboard.Instance, err error) {
	if err := c.check(); err != nil {
		return switchboard.Instance{}, err
	}
	if !storable(id) {
		err = pgx.ErrNoRows // no row can have it: the server would refuse the text
	} else {
		in, err = scanInstance(c.pool.QueryRow(ctx, `SELECT `+cols+` FROM instances WHERE id = $1`, id), &c.md)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Instance{}, fmt.Errorf("postgres: get: instance %q: %w", id, switchboard.ErrNotFound)
	}
	if err != nil {
		return switchboard.Instance{}, c.wrap("get", err)
	}
	return in, nil
}

// storable reports whether s is text PostgreSQL can hold (UTF-8 without
// NUL). A key that is not names no row: looking it up is not found, not
// the server's encoding error.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// listSQL builds the query of q: a capability filter is an array
// containment the GIN index serves; staleness is judged by now(); rows
// whose check is critical are left out unless q.All.
func listSQL(q switchboard.Query) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if q.Name != "" {
		add("name = ?", q.Name)
	}
	if q.Type != "" {
		add("type = ?", q.Type)
	}
	if q.Capability != "" {
		add("capabilities @> ARRAY[?::text]", q.Capability)
	}
	if !q.All {
		where = append(where, "now() - last_seen <= ttl", "health_status <> 'critical'")
	}
	s := `SELECT ` + cols + ` FROM instances`
	if len(where) > 0 {
		s += ` WHERE ` + strings.Join(where, " AND ")
	}
	return s + ` ORDER BY name, id`, args
}

// List returns the instances selected by q, ordered by name then id.
func (c *Catalog) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if !storable(q.Name) || !storable(q.Type) || !storable(q.Capability) {
		return []switchboard.Instance{}, nil // no row holds such text
	}
	s, args := listSQL(q)
	rows, err := c.pool.Query(ctx, s, append([]any{binaryResults}, args...)...)
	if err != nil {
		return nil, c.wrap("list", err)
	}
	out, err := readAll(rows, readOpts{md: &c.md})
	if err != nil {
		return nil, c.wrap("list", err)
	}
	return out, nil
}

// Reap deletes the rows whose last_seen is older than olderThan (zero: twice
// their own TTL), by the database clock, logging each as expired. Rows a
// heartbeat is renewing right now are skipped, not waited for.
func (c *Catalog) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("postgres: reap: %w: olderThan must not be negative", switchboard.ErrInvalid)
	}
	if olderThan > 0 {
		return c.reap(ctx, `now() - last_seen > $1::interval`, olderThan)
	}
	return c.reap(ctx, `now() - last_seen > 2 * ttl`)
}
