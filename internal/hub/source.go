// Package hub turns a backend's change log into Catalog.Watch: one mirror of
// the catalog per process, fed by the backend's push (Notify) and a
// safety-net poll, with per-instance TTL expiry judged on the catalog's
// clock, outage handling (serve the last known set, hold expiry until the
// catalog has been reachable for a TTL), self-preservation, and fan-out to
// every watcher of the process through its own bounded queue: a watcher
// that stops reading is coalesced to one pending change per instance and
// caught up from the mirror (net added/updated/removed, then Synced) when it
// reads again, so it costs memory bounded by the catalog, never by the
// number of changes it missed (see watcher.go).
//
// Every state carries its catalog version (Instance.Revision), and the
// mirror takes a state only when it is newer than the one it holds, so the
// paths that feed it (snapshot, resync, log reads, publishes, pushes) need
// no order among themselves and no watcher ever goes back in time; the
// log position is only a cursor of what has been read, gaps of writers
// still in flight included (see versions.go).
//
// A backend implements Source and calls Hub.Notify after each write it makes
// and whenever its push channel (LISTEN/NOTIFY, file change) fires. A
// backend that also implements Streamer hands a new process's first
// snapshot over in parts as it reads them, and the hub applies and sorts
// each part on another goroutine meanwhile (see stream.go); in the
// periodic resync it can leave out, undecoded, the rows whose digest says
// the mirror holds them as stored (Held, see resync.go).
package hub

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-io/switchboard"
)

// ErrCursorGone is returned by Source.ChangesSince when the log no longer
// holds the entries after the given position (trimmed); the hub then
// resyncs from a snapshot and emits exactly the differences.
var ErrCursorGone = errors.New("change log position no longer available")

// Change is one entry of the backend's change log, in log order.
//
// Versions: Instance.Revision is the position of the change that last
// wrote the row (0 when the source does not track it), and a deletion's
// own version is its Seq. The hub applies a state of an instance only when
// it is newer than the one it holds (see versions.go), whichever path
// brings it: a snapshot, a log read, a write's own publish or a push.
//
// A source whose revisions are not its log positions (kube://: the
// API server's resourceVersions, while the log is numbered by the process
// that reads the watch) says so with Revision on its deletions and on its
// reads (Snapshot, Part, Batch): the hub then compares versions only with
// versions, never with positions.
type Change struct {
	Seq int64
	ID  string
	// Deleted is true for a deregistration or a reap; Reason says which.
	Deleted bool
	Reason  switchboard.Reason
	// Revision is a deletion's version where the source's revisions are
	// not its log positions: between the revision of the state it removes
	// (inclusive) and that of any later state of the id. 0: Seq.
	Revision int64
	// Instance is the row as it is now, for an upsert. Found is false when
	// the row is already gone (a later entry deletes it).
	Instance switchboard.Instance
	Found    bool
	// At is the catalog's clock when the entry was written (zero when the
	// source does not say): with Seq and ID, what Cursor.Last marks.
	At time.Time
}

// Cursor is how far a hub has read a change log. Every entry at or below
// Seq has been read or will never exist. Above it, a log whose writers
// commit out of order (PostgreSQL) may show entries after numbers still in
// flight: Read is the highest number read, and Missing the numbers in
// (Seq, Read] not read yet, ascending. A source without such gaps keeps
// Read equal to Seq and Missing empty.
type Cursor struct {
	Seq     int64
	Read    int64
	Missing []int64
	// Last identifies the highest entry read from the log (zero before
	// any): a log that holds another entry at its seq, or none while its
	// seq is above the trimmed point, is another history whatever its
	// epoch says (the same backup restored twice, a database failed over
	// to a replica that had not received it): ErrCursorGone.
	Last Mark
}

// Mark identifies one log entry across histories: its position, instance
// and the catalog's clock when it was written.
type Mark struct {
	Seq int64
	ID  string
	At  time.Time
}

// Same reports whether an entry read now (id, at) is the one m marks.
func (m Mark) Same(id string, at time.Time) bool { return m.ID == id && m.At.Equal(at) }

// Snapshot is every row (stale ones included) and the log position it is
// consistent with.
type Snapshot struct {
	Instances []switchboard.Instance
	// Seq is the position every entry up to which is reflected in the
	// rows; Read and Missing, as in Cursor, what the rows reflect beyond
	// it (zero Read: nothing beyond Seq).
	Seq     int64
	Read    int64
	Missing []int64
	// Last marks the log's highest entry the rows reflect (zero: none, or
	// the source does not say): the cursor's Last after the snapshot.
	Last Mark
	// Revision, where the source's revisions are not its log positions,
	// is the highest revision the rows reflect: a state the mirror holds
	// at or below it that the rows lack was deleted. 0: they are, and
	// Seq, Read and Missing say what the rows reflect.
	Revision int64
	// Epoch names the catalog's history (created with its schema): a
	// position is only meaningful within one epoch. A catalog re-created or
	// restored from elsewhere has another epoch, even where its sequence
	// numbers overlap the cursor's.
	Epoch string
	Now   time.Time // catalog clock at the read
}

// Batch is the log after a position.
type Batch struct {
	Changes []Change
	// Seq, Read and Missing are the cursor after the batch (see Cursor):
	// Seq is the position after the last change (unchanged when empty);
	// a zero Read means Read equals Seq and nothing is missing.
	Seq     int64
	Read    int64
	Missing []int64
	// Revision, where the source's revisions are not its log positions,
	// is the highest revision the read reflects (see Snapshot.Revision);
	// 0 otherwise.
	Revision int64
	// Epoch is the history the changes were read from (see Snapshot.Epoch):
	// a batch from another epoch than the hub's cursor is never applied;
	// the hub resyncs from a snapshot instead.
	Epoch string
	Now   time.Time // catalog clock at the read
}

// Renewal is one row's last_seen.
type Renewal struct {
	ID       string
	LastSeen time.Time
}

// Source is what a backend gives the hub. Every call reads the catalog; an
// error means the catalog is unreachable (the hub retries with backoff).
type Source interface {
	// Snapshot reads every row and the current log position.
	Snapshot(ctx context.Context) (Snapshot, error)
	// ChangesSince reads the log entries the cursor has not read (above
	// cur.Read, and the numbers in cur.Missing), each joined with the row
	// as it is now, in seq order, and returns the cursor after them.
	// ErrCursorGone when the log was trimmed past what the cursor needs.
	ChangesSince(ctx context.Context, cur Cursor) (Batch, error)
	// RenewedSince returns the rows whose last_seen is after since, and the
	// catalog clock (heartbeats are learned in bulk, never as events).
	RenewedSince(ctx context.Context, since time.Time) ([]Renewal, time.Time, error)
}

// Streamer is a Source that can hand its snapshot over as it reads it. A
// new process's first Watch then applies each part to the mirror while the
// source reads the next, on another core, instead of reading everything
// first and applying it after; a periodic resync reconciles each part as
// it comes.
type Streamer interface {
	Source
	// StreamSnapshot reads what Snapshot reads, in one consistent read,
	// and calls emit with its rows in parts, in any order, as they are
	// read. Every part carries the same Seq, Epoch and Now; Rows, on each,
	// is how many rows the whole snapshot is expected to hold (a hint: 0
	// when unknown). The hub owns the instances it is handed. An error from
	// emit (the hub gave up) ends the read and is returned; when
	// StreamSnapshot returns an error, the hub keeps nothing it emitted.
	//
	// In a resync's read held is not nil, and a source that digests its
	// rows (Part.Digests) may ask it before it decodes a row: when held
	// says the hub holds the row as stored, the row is left out of the
	// parts. Other sources never call held. A first snapshot (held nil)
	// need not carry digests: the first resync learns them.
	StreamSnapshot(ctx context.Context, held Held, emit func(Part) error) error
}

// Part is some of a streamed snapshot's rows (Streamer).
type Part struct {
	Instances []switchboard.Instance
	// Digests, when not nil, holds a digest of each instance's row as the
	// source stores it, all but its last_seen (0: none), index for index
	// with Instances. The hub keeps it with the instance until a change
	// replaces it, and compares it in held.
	Digests []uint64
	Rows    int
	Seq     int64
	Read    int64   // as in Snapshot
	Missing []int64 // as in Snapshot
	Last    Mark    // as in Snapshot
	// Revision as in Snapshot.
	Revision int64
	Epoch    string
	Now      time.Time
}

// Held reports whether the hub's mirror holds, as stored, the row of id
// whose digest (Part.Digests: never 0) and last_seen a source has read but
// not decoded, in the read head describes (its Seq, Epoch and Now; no
// instances). When it does, the hub counts the row as seen (and takes its
// last_seen where that revives an entry it holds expired): the source
// leaves it out of the parts. A row held returns false for is decoded and
// handed over as usual.
type Held func(head *Part, id string, digest uint64, lastSeen time.Time) bool
