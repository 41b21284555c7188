package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// source is the catalog as the hub reads it (hub.Source).
type source struct{ c *Catalog }

var _ hub.Source = source{}

// logPosition reads, in one statement, the catalog's clock, the last
// sequence number ever given to a change-log entry (AUTOINCREMENT never
// reuses one, even after a trim), the position up to which the log has been
// trimmed, and the epoch they belong to: a watcher reads them after every
// commit it is told of.
func logPosition(ctx context.Context, tx *txn) (now, head, trimmed int64, epoch string, err error) {
	err = tx.QueryRowContext(ctx, `SELECT `+nowSQL+`,
		coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0),
		(SELECT value FROM meta WHERE key = 'trimmed_seq'),
		(`+epochSQL+`)`).Scan(&now, &head, &trimmed, &epoch)
	return now, head, trimmed, epoch, err
}

// snapshotRead runs read in one read transaction with what a snapshot
// carries besides its rows: the log position, the epoch, the catalog clock
// (now, also in microseconds) and the number of rows, counted through the
// smallest index so that they can be read into one allocation.
func (c *Catalog) snapshotRead(ctx context.Context, read func(tx *txn, head hub.Part, now int64) error) error {
	if c.closed.Load() {
		return errClosed("snapshot")
	}
	err := c.read(ctx, func(tx *txn) error {
		now, seq, _, epoch, err := logPosition(ctx, tx)
		if err != nil {
			return err
		}
		head := hub.Part{Seq: seq, Epoch: epoch, Now: time.UnixMicro(now).UTC()}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM instances`).Scan(&head.Rows); err != nil {
			return err
		}
		var at int64
		err = tx.QueryRowContext(ctx, `SELECT seq, id, at FROM changes ORDER BY seq DESC LIMIT 1`).
			Scan(&head.Last.Seq, &head.Last.ID, &at)
		switch {
		case errors.Is(err, sql.ErrNoRows): // an empty (or trimmed-empty) log marks nothing
		case err != nil:
			return err
		default:
			head.Last.At = time.UnixMicro(at).UTC()
		}
		return read(tx, head, now)
	})
	if err != nil {
		return fmt.Errorf("sqlite: snapshot: %w", err)
	}
	return nil
}

// Snapshot reads every row (stale ones included) and the log position, in
// one read transaction.
func (s source) Snapshot(ctx context.Context) (hub.Snapshot, error) {
	var snap hub.Snapshot
	err := s.c.snapshotRead(ctx, func(tx *txn, head hub.Part, now int64) error {
		// The hub never modifies an instance, so equal capabilities and
		// metadata are decoded once and shared.
		ins, err := queryInstances(ctx, tx, newSharer(), &s.c.md, now, head.Rows, `SELECT `+packedCols+` FROM instances i`)
		snap = hub.Snapshot{Instances: ins, Seq: head.Seq, Last: head.Last, Epoch: head.Epoch, Now: head.Now}
		return err
	})
	if err != nil {
		return hub.Snapshot{}, err
	}
	return snap, nil
}

var _ hub.Streamer = source{}

// StreamSnapshot reads what Snapshot reads, in one read transaction, and
// hands the rows to emit in parts (hub.PartSize) as they are read (in the
// table's order, by id), decoded: a new process's hub applies one part
// while this goroutine reads the next. In a resync (held not nil) each row
// carries the digest of its packed form and components (packedRow.digest),
// and a row the hub holds as stored is not decoded at all.
func (s source) StreamSnapshot(ctx context.Context, held hub.Held, emit func(hub.Part) error) error {
	return s.c.snapshotRead(ctx, func(tx *txn, head hub.Part, now int64) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+packedCols+` FROM instances i`)
		if err != nil {
			return err
		}
		defer rows.Close()
		sh := newSharer() // shared across parts: the hub never modifies an instance
		parts := hub.NewParts(head, held, emit)
		var p packedRow
		dest := p.dest()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			var d uint64 // a first snapshot's rows go without: it is read once
			if held != nil {
				d = p.digest()
				if id, ok := packedID(p.packed); ok && parts.Held(id, d, time.UnixMicro(p.lastSeen).UTC()) {
					continue
				}
			}
			in, err := parts.NextDigested(d)
			if err != nil {
				return err
			}
			if err := p.decode(in, sh, &s.c.md, now); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return parts.Close()
	})
}

// changesBatch bounds one ChangesSince read (as on PostgreSQL): a hub that
// fell far behind catches up in short read transactions, which neither hold
// back WAL checkpoints nor run into the read timeout; it is notified again
// while more entries wait.
const changesBatch = 5000

// ChangesSince reads up to changesBatch log entries after the cursor, each joined
// with its row as it is now, in one read transaction. hub.ErrCursorGone
// when entries after seq were trimmed, or when seq is ahead of the log (the
// database was replaced, e.g. restored from a backup).
func (s source) ChangesSince(ctx context.Context, cur hub.Cursor) (hub.Batch, error) {
	seq := cur.Seq // SQLite commits its writers one at a time: the log has no gaps to wait for
	c := s.c
	if c.closed.Load() {
		return hub.Batch{}, errClosed("changes")
	}
	var b hub.Batch
	more := false
	err := c.read(ctx, func(tx *txn) error {
		more = false
		now, head, trimmed, epoch, err := logPosition(ctx, tx)
		if err != nil {
			return err
		}
		if seq < trimmed || seq > head {
			return fmt.Errorf("%w: position %d, log holds (%d, %d]", hub.ErrCursorGone, seq, trimmed, head)
		}
		if err := checkMark(ctx, tx, cur.Last, trimmed); err != nil {
			return err
		}
		b = hub.Batch{Seq: seq, Epoch: epoch, Now: time.UnixMicro(now).UTC()}
		if seq == head {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT ch.seq, ch.at, ch.op, ch.reason, i.id IS NOT NULL,
			ch.id, coalesce(i.name, ''), coalesce(i.type, ''), coalesce(i.address, ''),
			coalesce(i.capabilities, '[]'), coalesce(i.version, ''), coalesce(i.metadata, '{}'),
			i.components, coalesce(i.ttl_ms, 0), coalesce(i.registered_at, 0), coalesce(i.last_seen, 0),
			coalesce(i.revision, 0), coalesce(i.weight, 100), coalesce(i.zone, ''), coalesce(i.draining, 0), i.check_spec,
			coalesce(i.health_status, ''), coalesce(i.health_output, ''), i.health_since
			FROM changes ch LEFT JOIN instances i ON i.id = ch.id
			WHERE ch.seq > ? ORDER BY ch.seq LIMIT ?`, seq, changesBatch+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if len(b.Changes) == changesBatch {
				more = true
				break
			}
			var (
				ch         hub.Change
				at         int64
				op, reason string
			)
			r, err := scanRow(rows, &ch.Seq, &at, &op, &reason, &ch.Found)
			if err != nil {
				return err
			}
			b.Seq, ch.ID, ch.At = ch.Seq, r.id, time.UnixMicro(at).UTC()
			switch {
			case op == "delete":
				ch.Deleted, ch.Reason, ch.Found = true, switchboard.Reason(reason), false
				ch.Instance.ID = r.id
			case ch.Found:
				if ch.Instance, err = r.instance(now, &c.md); err != nil {
					return err
				}
			default:
				ch.Instance.ID = r.id
			}
			b.Changes = append(b.Changes, ch)
		}
		return rows.Err()
	})
	if err != nil {
		return hub.Batch{}, fmt.Errorf("sqlite: changes since %d: %w", seq, err)
	}
	if more {
		c.notify()
	}
	return b, nil
}

// checkMark returns hub.ErrCursorGone when the log holds another entry at
// the seq last marks, or none while that seq is above the trimmed point:
// the file was replaced by another history (the same backup restored
// again keeps its epoch and may have written past the cursor since).
func checkMark(ctx context.Context, tx *txn, last hub.Mark, trimmed int64) error {
	if last.Seq == 0 || last.Seq <= trimmed {
		return nil
	}
	var (
		id string
		at int64
	)
	err := tx.QueryRowContext(ctx, `SELECT id, at FROM changes WHERE seq = ?`, last.Seq).Scan(&id, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: the entry read last (seq %d) is not in the log", hub.ErrCursorGone, last.Seq)
	case err != nil:
		return err
	case !last.Same(id, time.UnixMicro(at).UTC()):
		return fmt.Errorf("%w: the log holds another entry at seq %d than the one read", hub.ErrCursorGone, last.Seq)
	}
	return nil
}

// RenewedSince returns the rows whose last_seen is after since (one range
// of the instances_expiry index per TTL: see byTTL) and the catalog clock.
func (s source) RenewedSince(ctx context.Context, since time.Time) ([]hub.Renewal, time.Time, error) {
	c := s.c
	if c.closed.Load() {
		return nil, time.Time{}, errClosed("renewed")
	}
	var (
		out []hub.Renewal
		now int64
	)
	err := c.read(ctx, func(tx *txn) error {
		out = nil
		var err error
		if now, err = clock(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, renewedSQL, since.UnixMicro())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id   string
				seen int64
			)
			if err := rows.Scan(&id, &seen); err != nil {
				return err
			}
			out = append(out, hub.Renewal{ID: id, LastSeen: time.UnixMicro(seen).UTC()})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sqlite: renewed since %s: %w", since.UTC().Format(switchboard.TimeFormat), err)
	}
	return out, time.UnixMicro(now).UTC(), nil
}

// maybeTrim trims the change log inside a write transaction, at most once
// per trimEvery in this process. The entries up to head-keepChanges go once
// the newest of them is older than keepChangesAge; the trimmed-up-to
// position is recorded in meta, so ChangesSince can tell a trimmed log from
// an empty one.
func (c *Catalog) maybeTrim(ctx context.Context, tx *txn, now int64) error {
	last := c.lastTrim.Load()
	t := time.Now().UnixNano()
	if t-last < int64(c.trimEvery) || !c.lastTrim.CompareAndSwap(last, t) {
		return nil
	}
	_, head, trimmed, _, err := logPosition(ctx, tx)
	if err != nil {
		return err
	}
	bound := head - c.keepChanges
	if bound <= trimmed {
		return nil
	}
	var at sql.NullInt64
	if err := tx.QueryRowContext(ctx,
		`SELECT at FROM changes WHERE seq <= ? ORDER BY seq DESC LIMIT 1`, bound).Scan(&at); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if at.Valid && at.Int64 >= now-c.keepChangesAge.Microseconds() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM changes WHERE seq <= ?`, bound); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'trimmed_seq'`, bound)
	return err
}
