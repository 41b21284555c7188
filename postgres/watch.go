package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
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

func (c *Catalog) startHub() (*hub.Hub, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, switchboard.ErrClosed
	}
	if c.hub == nil {
		c.hub = hub.New(source{c}, hub.Options{PollInterval: c.opts.PollInterval, Logger: c.opts.Logger,
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

// listen keeps one connection LISTENing on Channel until Close and calls
// Notify on every notification. After each (re)connection it calls Notify
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
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			h.Notify()
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

// Snapshot reads every row and the log position they are consistent with.
func (s source) Snapshot(ctx context.Context) (hub.Snapshot, error) {
	var snap hub.Snapshot
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT greatest((SELECT max(seq) FROM changes), trimmed_to), `+epochSQL+`, now() FROM change_log`).
			Scan(&snap.Seq, &snap.Epoch, &snap.Now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+cols+` FROM instances ORDER BY name, id`)
		if err != nil {
			return err
		}
		snap.Instances, err = scanInstances(rows)
		return err
	})
	if err != nil {
		return hub.Snapshot{}, s.c.wrap("snapshot", err)
	}
	snap.Now = snap.Now.UTC()
	return snap, nil
}

// maxBatch bounds one ChangesSince read; the hub is notified again when more
// entries wait.
const maxBatch = 5000

// ChangesSince reads the log after seq, each entry joined with the row as
// it is now. A position the log no longer holds (trimmed), or one from the
// future (the database was restored or recreated), is ErrCursorGone.
func (s source) ChangesSince(ctx context.Context, seq int64) (hub.Batch, error) {
	b := hub.Batch{Seq: seq}
	more := false
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var trimmed, last int64
		if err := tx.QueryRow(ctx, `SELECT trimmed_to, (SELECT last_value FROM changes_seq_seq), `+epochSQL+`, now() FROM change_log`).
			Scan(&trimmed, &last, &b.Epoch, &b.Now); err != nil {
			return err
		}
		if seq < trimmed || seq > last {
			return fmt.Errorf("position %d (log holds %d..%d): %w", seq, trimmed, last, hub.ErrCursorGone)
		}
		rows, err := tx.Query(ctx, `SELECT c.seq, c.id, c.op, c.reason, i.id IS NOT NULL,
				i.id, i.name, i.type, i.address, i.capabilities, i.version, i.metadata, i.components::text, i.ttl,
				i.registered_at, i.last_seen, (now() - i.last_seen > i.ttl)
			FROM changes c LEFT JOIN instances i ON i.id = c.id
			WHERE c.seq > $1 ORDER BY c.seq LIMIT $2`, seq, maxBatch+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if len(b.Changes) == maxBatch {
				more = true
				break
			}
			var ch hub.Change
			var op, reason string
			var r nullableRow
			dest := append([]any{&ch.Seq, &ch.ID, &op, &reason, &ch.Found}, r.dest()...)
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			ch.Deleted = op == "delete"
			ch.Reason = switchboard.Reason(reason)
			if ch.Found && !ch.Deleted {
				if ch.Instance, err = r.instance(); err != nil {
					return err
				}
			} else {
				ch.Found = false
				ch.Instance = switchboard.Instance{ID: ch.ID}
			}
			b.Changes = append(b.Changes, ch)
			b.Seq = ch.Seq
		}
		return rows.Err()
	})
	if err != nil {
		return hub.Batch{}, s.c.wrap("changes", err)
	}
	b.Now = b.Now.UTC()
	if more {
		s.c.notify()
	}
	return b, nil
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
}

func (r *nullableRow) dest() []any {
	return []any{&r.id, &r.name, &r.typ, &r.address, &r.caps, &r.version, &r.metadata, &r.components,
		&r.ttl, &r.registeredAt, &r.lastSeen, &r.stale}
}

func (r *nullableRow) instance() (switchboard.Instance, error) {
	full := row{metadata: r.metadata, components: r.components}
	full.in = switchboard.Instance{ID: *r.id, Name: *r.name, Type: *r.typ, Address: *r.address,
		Capabilities: r.caps, Version: *r.version, TTL: *r.ttl, RegisteredAt: *r.registeredAt,
		LastSeen: *r.lastSeen, Stale: *r.stale}
	return full.instance()
}
