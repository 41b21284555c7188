package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

// Watch streams the instances selected by q; see switchboard.Catalog. All
// watchers of one Catalog share one hub and one LISTEN connection, started
// by the first Watch.
func (c *Catalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	h, err := c.startHub()
	if err != nil {
		return nil, err
	}
	ch, err := h.Watch(ctx, q)
	if err != nil {
		return nil, c.wrap("watch", err)
	}
	return ch, nil
}

var _ switchboard.WatchResumer = (*Catalog)(nil)

// WatchFrom resumes a watch from an Event.Position an earlier watch of this
// catalog delivered (in any process); see switchboard.WatchResumer.
func (c *Catalog) WatchFrom(ctx context.Context, q switchboard.Query, position string) (<-chan switchboard.Event, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	h, err := c.startHub()
	if err != nil {
		return nil, err
	}
	ch, err := h.WatchFrom(ctx, q, position)
	if err != nil {
		return nil, c.wrap("watch from", err)
	}
	return ch, nil
}

func (c *Catalog) startHub() (*hub.Hub, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, switchboard.ErrClosed
	}
	if c.hub == nil {
		c.hub = hub.New(source{c}, hub.Options{PollInterval: c.opts.PollInterval, Logger: c.opts.Logger, Resumable: true,
			SelfPreservationThreshold: c.opts.SelfPreservationThreshold, SelfPreservationMin: c.opts.SelfPreservationMin})
		c.listenWG.Add(1)
		go c.listen()
	}
	return c.hub, nil
}

// Listener pacing: reconnect backoff, and how long the connection may stay
// silent before it is pinged (a cut that sends no RST would otherwise
// leave it waiting forever).
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
	listenIdlePing   = 15 * time.Second
	listenPingWait   = 5 * time.Second
)

// listen keeps one connection LISTENing on Channel until Close and hands
// every notification to the hub (onNotification). After each (re)connection
// it calls Notify
// too: the hub then reads the log from its cursor, so whatever changed while
// the connection was down reaches the watchers exactly once.
func (c *Catalog) listen() {
	defer c.listenWG.Done()
	backoff := listenMinBackoff
	up := false // connected since the last failure was logged
	for c.ctx.Err() == nil {
		err := c.listenOnce(func() {
			if backoff > listenMinBackoff || up {
				c.log.Info("change listener: reconnected")
			}
			backoff, up = listenMinBackoff, true
		})
		if c.ctx.Err() != nil {
			return
		}
		if up {
			c.log.Warn("change listener: connection lost; reconnecting", "err", switchboard.RedactError(err, c.dsn))
			up = false
		} else {
			c.log.Debug("change listener: reconnect failed", "err", switchboard.RedactError(err, c.dsn), "backoff", backoff)
		}
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			return
		}
		backoff = min(backoff*2, listenMaxBackoff)
	}
}

func (c *Catalog) listenOnce(connected func()) error {
	ctx := c.ctx
	cfg := c.pool.Config().ConnConfig.Copy()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	c.mu.Lock()
	h, hook := c.hub, c.onListen
	c.mu.Unlock()
	h.Notify()
	if hook != nil {
		hook()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdlePing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			c.onNotification(h, n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, listenPingWait)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

// onNotification hands the hub the change a notification carries
// (notice.go): the hub applies it at once where it is newer than the
// mirror's state (its revision is its seq), in any order, and reads the log
// after it. An empty payload, or one this version cannot read, only makes
// it read the log.
func (c *Catalog) onNotification(h *hub.Hub, payload string) {
	if payload == "" {
		h.Notify()
		return
	}
	b, err := decodeNotice(payload)
	if err != nil {
		c.log.Debug("change listener: reading the log instead", "err", err)
		h.Notify()
		return
	}
	h.Publish(b)
}

// source gives the hub its reads of the catalog.
type source struct{ c *Catalog }

var _ hub.Source = source{}

// readTx runs fn in a read-only REPEATABLE READ transaction: one snapshot
// of the log and the rows.
func (s source) readTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := s.c.check(); err != nil {
		return err
	}
	return pgx.BeginTxFunc(ctx, s.c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// Snapshot reads every row and a log position P such that every entry up
// to P that will ever commit is reflected in the rows. Under concurrent
// writers some entries after P are reflected too (they committed before
// entries below them): the snapshot's Read and Missing say which, and
// reading them again is harmless anyway (the hub takes only newer
// revisions). Snapshot observes the writers first and reads once all of
// them have ended: a writer holding its transaction open is waited for,
// up to ctx (writers that began after the observation are not). Unlike a
// log read, a first snapshot or a resync therefore still waits for a
// stalled writer, bounded by the read's timeout.
func (s source) Snapshot(ctx context.Context) (hub.Snapshot, error) {
	var snap hub.Snapshot
	err := s.settledRead(ctx, func(head hub.Part, rows pgx.Rows) (err error) {
		snap = hub.Snapshot{Seq: head.Seq, Read: head.Read, Missing: head.Missing, Last: head.Last, Epoch: head.Epoch, Now: head.Now}
		snap.Instances, err = readAll(rows, readOpts{sizeHint: head.Rows, sort: true, share: true, md: &s.c.md})
		return err
	})
	if err != nil {
		return hub.Snapshot{}, s.c.wrap("snapshot", err)
	}
	return snap, nil
}

// StreamSnapshot reads what Snapshot reads and hands the rows to emit in
// parts (hub.PartSize) as they arrive (in the table's physical order),
// decoded: a new process's hub applies one part while this goroutine
// receives and decodes the next. In a resync (held not nil) each row
// carries the digest of its columns as received (rowDigest), and a row the
// hub holds as stored is not decoded at all.
func (s source) StreamSnapshot(ctx context.Context, held hub.Held, emit func(hub.Part) error) error {
	err := s.settledRead(ctx, func(head hub.Part, rows pgx.Rows) error {
		defer rows.Close()
		parts := hub.NewParts(head, held, emit)
		it := newInterner() // shared across parts: the hub never modifies an instance
		for rows.Next() {
			vals := rows.RawValues()
			var d uint64 // a first snapshot's rows go without: it is read once
			if held != nil {
				d = rowDigest(vals)
				if len(vals) == len(binaryResults) && vals[0] != nil {
					if seen, err := timestamptz(vals[10]); err == nil && parts.Held(string(vals[0]), d, seen) {
						continue
					}
				}
			}
			in, err := parts.NextDigested(d)
			if err != nil {
				return err
			}
			if err := decodeRow(vals, in, it, &s.c.md); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return parts.Close()
	})
	if err != nil {
		return s.c.wrap("snapshot", err)
	}
	return nil
}

var _ hub.Streamer = source{}

// settledRead observes the writers, then reads every row once all of
// them have ended: read gets the position, the clock and the planner's row
// estimate (head, without instances; Rows is never negative) and the rows
// of snapshotQuery (see Snapshot). A writer
// holding its transaction open is waited for, up to ctx; writers that
// began after the observation are not.
func (s source) settledRead(ctx context.Context, read func(head hub.Part, rows pgx.Rows) error) error {
	w, err := s.c.observeWriters(ctx)
	if err != nil {
		return err
	}
	// Writers in flight end within a commit: a few short waits settle
	// them. One that holds its transaction open is not waited for past
	// unsettledAfter: the read then names missing every number of the last
	// missingWindow it cannot see, and the hub reads them again.
	waited := time.NewTimer(unsettledAfter)
	defer waited.Stop()
	unsettled := false
	for attempt := 0; ; attempt++ {
		settled, err := s.snapshot(ctx, w, read, unsettled)
		if err != nil || settled {
			return err
		}
		if attempt >= 2 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("change-log writers still in flight (transactions %v): %w", w.xids, ctx.Err())
			case <-waited.C:
				unsettled = true
			case <-time.After(min(time.Duration(attempt)*time.Millisecond, 50*time.Millisecond)):
			}
		}
	}
}

// A snapshot waits at most unsettledAfter for the writers it observed;
// then every number of the last missingWindow below the last one drawn
// that it cannot see is missing (read again later), and the numbers before
// them are taken as settled. A writer of this package is rolled back long
// before missingWindow numbers pass (writerIdle, writerStatement); another
// client's transaction held open across that many changes may have its
// change found only by the periodic resync.
const (
	unsettledAfter = 200 * time.Millisecond
	missingWindow  = 10000
)

// snapshot is one attempt of settledRead after observing w; settled is
// false (and nothing is read) while w's writers have not all ended, unless
// unsettled says to read anyway (see unsettledAfter).
func (s source) snapshot(ctx context.Context, w writers, read func(head hub.Part, rows pgx.Rows) error, unsettled bool) (settled bool, err error) {
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		var head hub.Part
		var mvcc string
		var trimmed int64
		if err := tx.QueryRow(ctx, `SELECT trimmed_to, `+epochSQL+`, now(), `+snapshotSQL+`,
				(SELECT reltuples::int FROM pg_class WHERE oid = 'instances'::regclass) FROM change_log`).
			Scan(&trimmed, &head.Epoch, &head.Now, &mvcc, &head.Rows); err != nil {
			return err
		}
		head.Now, head.Rows = head.Now.UTC(), max(head.Rows, 0) // reltuples is -1 before the first analyze
		ms, err := parseSnapshot(mvcc)
		if err != nil {
			return err
		}
		// Up to base everything is settled: w.drawn when w's writers have
		// all ended; else the start of the window. After it, the entries
		// that follow one another are settled too.
		base := w.drawn
		if !w.settledIn(ms) {
			if !unsettled {
				return nil
			}
			base = max(w.drawn-missingWindow, 0)
		}
		settled = true
		after, err := tx.Query(ctx, `SELECT seq FROM changes WHERE seq > $1 ORDER BY seq`, base)
		if err != nil {
			return err
		}
		above, err := pgx.CollectRows(after, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		head.Seq = max(base, trimmed)
		for _, seq := range above {
			if seq != head.Seq+1 {
				break
			}
			head.Seq = seq
		}
		// Beyond the settled run, the rows reflect the visible entries;
		// the numbers between them are missing (writers in flight).
		if n := len(above); n > 0 && above[n-1] > head.Seq {
			head.Read = above[n-1]
			vis := make(map[int64]struct{}, n)
			for _, seq := range above {
				vis[seq] = struct{}{}
			}
			// At most the last missingWindow numbers: a sequence moved
			// far ahead (setval) leaves no list of millions behind.
			for seq := max(head.Seq+1, head.Read-missingWindow); seq < head.Read; seq++ {
				if _, ok := vis[seq]; !ok {
					head.Missing = append(head.Missing, seq)
				}
			}
		}
		// The highest entry the rows reflect marks the cursor (hub.Cursor.Last).
		err = tx.QueryRow(ctx, `SELECT seq, id, at FROM changes ORDER BY seq DESC LIMIT 1`).
			Scan(&head.Last.Seq, &head.Last.ID, &head.Last.At)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			head.Last = hub.Mark{}
		case err != nil:
			return err
		default:
			head.Last.At = head.Last.At.UTC()
		}
		rows, err := tx.Query(ctx, snapshotQuery, binaryResults)
		if err != nil {
			return err
		}
		return read(head, rows)
	})
	return settled, err
}

// maxBatch bounds one ChangesSince read; the hub is notified again when more
// entries wait.
const maxBatch = 5000

// ChangesSince reads the log entries the cursor has not read (above
// cur.Read, and the numbers in cur.Missing), each joined with the row as it
// is now, and hands on every one that is visible: delivery never waits
// for the log's order across instances (the hub takes a state only when
// its revision is newer). A number below a visible entry that is not
// visible is missing: its writer has not committed yet, or rolled back.
// It is read again later, and dropped once the watermark (watermark.go)
// says it is settled, so a writer that holds its transaction open delays
// its own change only. A position the log no longer holds (trimmed), or
// one from the future (the database was restored or recreated), is
// ErrCursorGone.
func (s source) ChangesSince(ctx context.Context, cur hub.Cursor) (hub.Batch, error) {
	var (
		b   hub.Batch
		err error
	)
	if len(cur.Missing) > 0 {
		// Numbers are awaited already: observe the writers first, so one
		// read both delivers and settles.
		var w writers
		if w, err = s.c.observeWriters(ctx); err == nil {
			b, err = s.changesSince(ctx, cur, &w)
		}
	} else if b, err = s.changesSince(ctx, cur, nil); err == nil && len(b.Missing) > 0 {
		var w writers
		if w, err = s.c.observeWriters(ctx); err == nil {
			b, err = s.changesSince(ctx, cur, &w)
		}
	}
	if err != nil {
		return hub.Batch{}, s.c.wrap("changes", err)
	}
	s.c.recheck(len(b.Missing) > 0)
	return b, nil
}

// changesSince is one read of ChangesSince. Without w it settles no
// missing number; with w, observed before the read, it settles those up to
// w.drawn when w's writers had all ended.
func (s source) changesSince(ctx context.Context, cur hub.Cursor, w *writers) (b hub.Batch, err error) {
	read := max(cur.Read, cur.Seq)
	more := false
	err = s.readTx(ctx, func(tx pgx.Tx) error {
		b = hub.Batch{Seq: cur.Seq}
		var trimmed, last int64
		var mvcc string
		// The entry the cursor read last (its mark) is read in the same
		// statement: one round trip a read.
		var markID *string
		var markAt *time.Time
		if err := tx.QueryRow(ctx, `SELECT trimmed_to, (SELECT last_value FROM changes_seq_seq), `+epochSQL+`, now(), `+snapshotSQL+`,
				(SELECT id FROM changes WHERE seq = $1), (SELECT at FROM changes WHERE seq = $1) FROM change_log`, cur.Last.Seq).
			Scan(&trimmed, &last, &b.Epoch, &b.Now, &mvcc, &markID, &markAt); err != nil {
			return err
		}
		if cur.Seq < trimmed || read > last {
			return fmt.Errorf("position %d (log holds %d..%d): %w", cur.Seq, trimmed, last, hub.ErrCursorGone)
		}
		if m := cur.Last; m.Seq > trimmed {
			switch {
			case markID == nil || markAt == nil:
				return fmt.Errorf("the entry read last (seq %d) is not in the log: %w", m.Seq, hub.ErrCursorGone)
			case !m.Same(*markID, markAt.UTC()):
				return fmt.Errorf("the log holds another entry at seq %d than the one read: %w", m.Seq, hub.ErrCursorGone)
			}
		}
		var settledTo int64
		if w != nil {
			ms, err := parseSnapshot(mvcc)
			if err != nil {
				return err
			}
			if w.settledIn(ms) {
				settledTo = w.drawn
			}
		}
		rows, err := tx.Query(ctx, `SELECT c.seq, c.at, c.id, c.op, c.reason, i.id IS NOT NULL,
				i.id, i.name, i.type, i.address, i.capabilities, i.version, i.metadata, i.components::text, i.ttl,
				i.registered_at, i.last_seen, (now() - i.last_seen > i.ttl), i.revision,
				i.weight, i.zone, i.draining, i.check_spec, i.health_status, i.health_output, i.health_since
			FROM changes c LEFT JOIN instances i ON i.id = c.id
			WHERE c.seq > $1 OR c.seq = ANY($3::bigint[]) ORDER BY c.seq LIMIT $2`, read, maxBatch+1, cur.Missing)
		if err != nil {
			return err
		}
		defer rows.Close()
		top := read // the highest number this read covers
		for rows.Next() {
			if len(b.Changes) == maxBatch {
				more = true
				break
			}
			var ch hub.Change
			var op, reason string
			var r nullableRow
			dest := append([]any{&ch.Seq, &ch.At, &ch.ID, &op, &reason, &ch.Found}, r.dest()...)
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			// A deletion whose row exists again (a later entry re-created
			// it) is read as the row: the state it leads to, whose revision
			// is that later entry's.
			ch.Deleted = op == "delete" && !ch.Found
			if ch.Deleted {
				ch.Reason = switchboard.Reason(reason)
			}
			if ch.Found {
				if ch.Instance, err = r.instance(&s.c.md); err != nil {
					return err
				}
			} else {
				ch.Found = false
				ch.Instance = switchboard.Instance{ID: ch.ID}
			}
			ch.At = ch.At.UTC()
			b.Changes = append(b.Changes, ch)
			top = max(top, ch.Seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		b.Read, b.Missing = top, missingAfter(cur.Missing, read, top, b.Changes, settledTo)
		b.Seq = top
		if len(b.Missing) > 0 {
			b.Seq = b.Missing[0] - 1
		}
		b.Seq = max(b.Seq, cur.Seq)
		return nil
	})
	if err != nil {
		return hub.Batch{}, err
	}
	b.Now = b.Now.UTC()
	if more {
		s.c.notify()
	}
	return b, nil
}

// missingAfter returns, ascending, the numbers a read leaves missing: those
// of missing and of (read, top] that none of the read's changes carries,
// but for those up to settledTo (settled: they will never be there).
func missingAfter(missing []int64, read, top int64, got []hub.Change, settledTo int64) []int64 {
	have := make(map[int64]struct{}, len(got))
	for i := range got {
		have[got[i].Seq] = struct{}{}
	}
	var out []int64
	keep := func(n int64) {
		if _, ok := have[n]; !ok && n > settledTo {
			out = append(out, n)
		}
	}
	for _, n := range missing {
		if n <= top {
			keep(n)
		}
	}
	// At most the last missingWindow numbers of the range read (see
	// unsettledAfter): a sequence moved far ahead (setval) must not make a
	// read walk, or a cursor carry, millions of numbers.
	for n := max(read+1, top-missingWindow); n <= top; n++ {
		keep(n)
	}
	return out
}

// RenewedSince returns every row whose last_seen is after since, and now().
func (s source) RenewedSince(ctx context.Context, since time.Time) ([]hub.Renewal, time.Time, error) {
	var out []hub.Renewal
	var now time.Time
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, last_seen FROM instances WHERE last_seen > $1`, since)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (hub.Renewal, error) {
			var rn hub.Renewal
			err := r.Scan(&rn.ID, &rn.LastSeen)
			rn.LastSeen = rn.LastSeen.UTC()
			return rn, err
		})
		return err
	})
	if err != nil {
		return nil, time.Time{}, s.c.wrap("renewals", err)
	}
	return out, now.UTC(), nil
}

// nullableRow scans the instance side of a LEFT JOIN, NULL when the row is
// gone.
type nullableRow struct {
	id, name, typ, address, version *string
	caps                            []string
	metadata                        []byte
	components                      *string
	ttl                             *time.Duration
	registeredAt, lastSeen          *time.Time
	stale                           *bool
	revision                        *int64
	weight                          *int
	zone, healthStatus, healthOut   *string
	draining                        *bool
	checkSpec                       []byte
	healthSince                     *time.Time
}

func (r *nullableRow) dest() []any {
	return []any{&r.id, &r.name, &r.typ, &r.address, &r.caps, &r.version, &r.metadata, &r.components,
		&r.ttl, &r.registeredAt, &r.lastSeen, &r.stale, &r.revision,
		&r.weight, &r.zone, &r.draining, &r.checkSpec, &r.healthStatus, &r.healthOut, &r.healthSince}
}

func (r *nullableRow) instance(ml *storedmeta.Log) (switchboard.Instance, error) {
	full := row{metadata: r.metadata, components: r.components, checkSpec: r.checkSpec,
		healthStatus: *r.healthStatus, healthSince: r.healthSince}
	full.in = switchboard.Instance{ID: *r.id, Name: *r.name, Type: *r.typ, Address: *r.address,
		Capabilities: r.caps, Version: *r.version, TTL: *r.ttl, RegisteredAt: *r.registeredAt,
		LastSeen: *r.lastSeen, Stale: *r.stale, Revision: *r.revision,
		Weight: *r.weight, Zone: *r.zone, Draining: *r.draining, Health: switchboard.Health{Output: *r.healthOut}}
	return full.instance(ml)
}

// Rechecks of a log read stopped at a gap: a writer that commits notifies,
// one that rolls back does not, so the read is repeated after a delay that
// grows while the gap stays.
const (
	recheckMin = 2 * time.Millisecond
	recheckMax = 500 * time.Millisecond
)

// recheck schedules another read of the log when the last one was blocked
// at a gap (at most one pending), and resets the delay when it was not.
func (c *Catalog) recheck(blocked bool) {
	if !blocked {
		c.recheckDelay.Store(0)
		return
	}
	if !c.recheckPending.CompareAndSwap(false, true) {
		return
	}
	d := min(max(2*time.Duration(c.recheckDelay.Load()), recheckMin), recheckMax)
	c.recheckDelay.Store(int64(d))
	time.AfterFunc(d, func() {
		c.recheckPending.Store(false)
		c.notify()
	})
}
