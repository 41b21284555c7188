package postgres

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
)

// The change log is written without any lock of its own. A change-writing
// transaction does its row work first (row locks order the writers of one
// instance, so one instance's entries are in commit order) and then draws
// its entries' seqs from the table's sequence, which hands them out in
// the order they are drawn, across all sessions (cache 1, migration 4).
// Transactions commit in any order, though, and a rolled-back one leaves
// its seqs unused for ever, so a reader that has seen seq N cannot assume
// it has seen everything below N: watermark.go holds the rule readers
// follow instead. What makes that rule possible: every writer holds the
// table's ROW EXCLUSIVE lock from before it draws a seq until it ends, and
// has its transaction id by the time it draws (the log's trigger takes it
// first, whoever inserts: migration 5), so pg_locks names every
// transaction that may still commit a seq drawn so far. The same trigger
// sets the row's revision to its entry's seq.

// logWrite is the change-log insert of a change-writing transaction: an
// INSERT INTO changes without a RETURNING clause (changeTx adds it).
type logWrite struct {
	sql  string
	args []any
}

// logged is one change-log entry as written: its position, instance id and
// the database's clock at the write.
type logged struct {
	seq int64
	id  string
	at  time.Time
}

// changeTx runs fn in a transaction that may write change-log entries: fn
// makes its changes to the rows and returns the log insert, or nil when
// nothing changed. Then, in one round trip, changeTx inserts the entries
// and reads the catalog's epoch (the hub applies a published write only
// within its cursor's history); now and then it trims the log. After the
// commit it notifies Channel with an empty payload (readers read the log).
func (c *Catalog) changeTx(ctx context.Context, fn func(tx pgx.Tx) (*logWrite, error)) (entries []logged, epoch string, err error) {
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		entries, epoch = nil, ""
		if _, err := tx.Exec(ctx, `SELECT `+writerBounds); err != nil {
			return err
		}
		w, err := fn(tx)
		if err != nil || w == nil {
			return err
		}
		var b pgx.Batch
		// The transaction id first: a reader must find it in pg_locks
		// from the moment the entries hold their seqs.
		b.Queue(`SELECT pg_current_xact_id()`)
		b.Queue(w.sql+` RETURNING seq, id, clock_timestamp()`, w.args...)
		b.Queue(`SELECT ` + epochSQL)
		br := tx.SendBatch(ctx, &b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		rows, err := br.Query()
		if err == nil {
			entries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (logged, error) {
				var l logged
				return l, r.Scan(&l.seq, &l.id, &l.at)
			})
		}
		if err == nil {
			// RETURNING follows the insert's order; sort to be sure.
			slices.SortFunc(entries, func(a, b logged) int { return cmp.Compare(a.seq, b.seq) })
			err = br.QueryRow().Scan(&epoch)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if c.writes.Add(1)%trimEvery == 0 {
			return c.trim(ctx, tx)
		}
		return nil
	})
	if err == nil && len(entries) > 0 {
		// After the commit: see notifySQL.
		if _, nerr := c.pool.Exec(ctx, `SELECT pg_notify($1, '')`, Channel); nerr != nil {
			c.log.Warn("change log: notify failed; watchers catch up at the next change or poll",
				"err", switchboard.RedactError(nerr, c.dsn))
		}
	}
	return entries, epoch, err
}

// logEntrySQL wraps insert, an INSERT INTO changes of at most one entry
// (parameters from $1), into the statement that logs it: it returns the
// entry's seq, the database clock, the catalog's epoch and set_config's
// result, and leaves in the session setting switchboard.notice the change
// itself (notice.go) for notifySQL to send after the commit, so that a
// process whose hub has seen everything before it applies it without
// reading the log. A payload that would not fit a notification
// (PostgreSQL's limit is 8,000 bytes; large components) is left empty,
// and listeners read the log instead.
func logEntrySQL(insert string) string {
	return `WITH l AS (` + insert + ` RETURNING seq, id, op, reason, at AS wrote, clock_timestamp() AS at),
		n AS (SELECT l.seq, l.at, ` + epochSQL + ` AS epoch, json_build_object(
			'e', ` + epochSQL + `, 's', l.seq, 't', l.at, 'w', l.wrote, 'o', l.op, 'r', l.reason, 'id', l.id,
			'i', CASE WHEN i.id IS NOT NULL THEN json_build_object(
				'name', i.name, 'type', i.type, 'address', i.address, 'capabilities', i.capabilities,
				'version', i.version, 'metadata', i.metadata, 'components', i.components,
				'ttl_us', (extract(epoch FROM i.ttl) * 1000000)::bigint,
				'registered_at', i.registered_at, 'last_seen', i.last_seen,
				'stale', now() - i.last_seen > i.ttl,
				'weight', i.weight, 'zone', i.zone, 'draining', i.draining, 'check', i.check_spec,
				'health_status', i.health_status, 'health_output', i.health_output, 'health_since', i.health_since) END)::text AS p
			FROM l LEFT JOIN instances i ON i.id = l.id AND l.op = 'upsert')
		SELECT seq, at, epoch, set_config('switchboard.notice',
			'n:' || CASE WHEN octet_length(p) < ` + maxPayloadSQL + ` THEN p ELSE '' END, false) FROM n`
}

// Notifications are sent after the commit, in a transaction of their own
// (the next statements of the same pipelined batch): PostgreSQL serialises
// the commits of all transactions that NOTIFY, cluster-wide, on one lock
// held through the commit's WAL flush, which is the very queue of fsyncs
// the change log no longer has. A notification lost between the two (the
// server crashed in between) only delays watchers until the next one or
// their poll: they read the log from their cursor either way.
const (
	// resetNoticeSQL clears a notice a failed batch may have left on the
	// connection, and bounds the transaction (writerBounds); it runs first
	// in every batch that logs.
	resetNoticeSQL = `SELECT set_config('switchboard.notice', '', false), ` + writerBounds

	// writerBounds bounds, for a change-writing transaction only, how long
	// it may stay open: a writer that stalls between drawing its seq and
	// committing (a paused or cut-off process) is rolled back by the
	// server after writerIdle idle in its transaction, or writerStatement
	// in one statement. Until then its own change waits; no other does.
	writerBounds = `set_config('idle_in_transaction_session_timeout', '` + writerIdle + `', true),
		set_config('statement_timeout', '` + writerStatement + `', true)`
	writerIdle      = "5s"
	writerStatement = "30s"
	// notifySQL sends the notice logEntrySQL left, if any, on Channel ($1).
	notifySQL = `SELECT pg_notify($1, substr(v, 3)), set_config('switchboard.notice', '', false)
		FROM (SELECT current_setting('switchboard.notice', true) AS v) x WHERE v LIKE 'n:%'`
)

// maxPayloadSQL is PostgreSQL's bound on a notification payload (bytes,
// exclusive).
const maxPayloadSQL = "8000"

// trimNow trims the log in a transaction of its own; a failure is logged,
// not returned (the next trim retries).
func (c *Catalog) trimNow(ctx context.Context) {
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error { return c.trim(ctx, tx) })
	if err != nil {
		c.log.Warn("change log: trim failed", "err", switchboard.RedactError(err, c.dsn))
	}
}

// trim deletes the log entries that are both outside the last keepEntries
// and older than keepAge, and records how far the log was trimmed. Both
// reads go by seq (the primary key): only the entries below the kept ones
// are looked at. Concurrent trims are harmless: each deletes a prefix and
// trimmed_to only grows. An entry below the cut that commits after the
// trim stays, and is harmless too: a reader positioned below trimmed_to
// resyncs from a snapshot, and one above it is past that entry.
func (c *Catalog) trim(ctx context.Context, tx pgx.Tx) error {
	var cut *int64
	err := tx.QueryRow(ctx, `SELECT max(seq) FROM changes
		WHERE seq <= (SELECT max(seq) FROM changes) - $1 AND at < now() - $2::interval`,
		c.keepEntries, c.keepAge).Scan(&cut)
	if err != nil || cut == nil || *cut <= 0 {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM changes WHERE seq <= $1`, *cut); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE change_log SET trimmed_to = greatest(trimmed_to, $1)`, *cut)
	return err
}
