package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The change log's watermark: up to which seq a reader has read every
// entry that will ever be there. Writers take no lock (changelog.go), so
// in a reader's snapshot a seq below a visible entry may be missing
// because its transaction is still in flight (it will commit later) or
// because it rolled back (it never will). A reader hands on every visible
// entry at once (the hub applies a state only when its revision is newer,
// so order across instances does not matter) and keeps the missing seqs in
// its cursor (hub.Cursor.Missing), to read again; the watermark is the
// seq below the lowest of them. It drops a missing seq once it knows it is
// settled:
//
//   - Before its snapshot, a reader observes the writers (observeWriters):
//     the last seq drawn so far, then the transactions holding the log's
//     ROW EXCLUSIVE lock. Every seq drawn so far is held by one of those
//     transactions or by one that has already ended (the log's trigger
//     takes the transaction id before it draws: migration 5). If none of
//     them is still in flight in the snapshot taken afterwards, every seq
//     up to the observed one is settled there: committed and visible, or
//     never to be.
//   - Otherwise the seq stays missing and is read again when a writer
//     commits (its NOTIFY) or, for one that rolls back and notifies
//     nobody, after a short delay (recheck). A writer that stays open
//     delays its own change only.
//
// Only the writers of this catalog's log are waited for, never another
// schema's, database's or long transaction that does not write the log
// (a global xmin horizon would wait for all of them).

// writers is one observation of the change log's writers.
type writers struct {
	drawn int64    // the last seq drawn before the observation (0: none yet)
	xids  []uint32 // transaction ids holding the log open at the observation
	anon  int      // holders of the log's lock without a transaction id
}

// observeWriters reads the last seq drawn and then (second statement, so
// strictly later) the transaction ids of the transactions that hold the
// log's ROW EXCLUSIVE lock, and how many hold it without an id. The log's
// trigger takes the id before it draws a seq, so such a holder has drawn
// none that an entry will carry; it still counts as in flight, never as
// done (settledIn), in case some path writes the log another way (with
// the triggers off, say): the observation then settles nothing, and the
// missing seqs wait for the next one. Only their own changes wait.
func (c *Catalog) observeWriters(ctx context.Context) (writers, error) {
	var w writers
	var b pgx.Batch
	b.Queue(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM changes_seq_seq`)
	b.Queue(`SELECT coalesce(array_agg(t.transactionid::text::bigint) FILTER (WHERE t.transactionid IS NOT NULL), '{}'),
			count(*) FILTER (WHERE t.transactionid IS NULL)
		FROM pg_locks r LEFT JOIN pg_locks t ON t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock'
			AND t.granted AND t.virtualtransaction = r.virtualtransaction
		WHERE r.locktype = 'relation' AND r.mode = 'RowExclusiveLock' AND r.granted
			AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND r.relation = 'changes'::regclass`)
	br := c.pool.SendBatch(ctx, &b)
	var xids []int64
	err := br.QueryRow().Scan(&w.drawn)
	if err == nil {
		err = br.QueryRow().Scan(&xids, &w.anon)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return writers{}, fmt.Errorf("observe change-log writers: %w", err)
	}
	for _, x := range xids {
		w.xids = append(w.xids, uint32(x))
	}
	return w, nil
}

// snapshotSQL is the reader's MVCC snapshot as text, xmin:xmax:xip,...
const snapshotSQL = `pg_current_snapshot()::text`

// mvccSnapshot is a parsed pg_snapshot: transactions below xmin have ended,
// those at or above xmax had not, and xip lists those in between that were
// still in flight.
type mvccSnapshot struct {
	xmin, xmax uint64
	xip        []uint64
}

func parseSnapshot(s string) (mvccSnapshot, error) {
	var snap mvccSnapshot
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snap, fmt.Errorf("snapshot %q: want xmin:xmax:xip", s)
	}
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snap, fmt.Errorf("snapshot %q: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snap, fmt.Errorf("snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return snap, fmt.Errorf("snapshot %q: %w", s, err)
			}
			snap.xip = append(snap.xip, x)
		}
	}
	return snap, nil
}

// ended reports whether the transaction with the 32-bit id x, which had
// its id when the snapshot was taken, had ended (committed or rolled back)
// by then.
func (s mvccSnapshot) ended(x uint32) bool {
	full := widen(x, s.xmax)
	return full < s.xmax && (full < s.xmin || !slices.Contains(s.xip, full))
}

// widen gives a 32-bit transaction id (pg_locks shows those) its epoch: the
// full id nearest to ref (a snapshot's xmax), which is the right one for
// any transaction alive within 2^31 transactions of ref.
func widen(x uint32, ref uint64) uint64 {
	return uint64(int64(ref) + int64(int32(x-uint32(ref))))
}

// settledIn reports whether every seq up to w.drawn is settled in snap: all
// the writers w saw had ended before snap was taken (and none held the
// log without an id, which cannot be followed).
func (w writers) settledIn(snap mvccSnapshot) bool {
	if w.anon > 0 {
		return false
	}
	for _, x := range w.xids {
		if !snap.ended(x) {
			return false
		}
	}
	return true
}
