package hub

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Options tune a Hub. Zero values take the defaults.
type Options struct {
	// PollInterval is the safety-net full resync period (default 30 s):
	// each wait is drawn anew between four fifths of it and all of it
	// (resyncAfter).
	PollInterval time.Duration
	// Logger receives the hub's logs (default slog.Default()).
	Logger *slog.Logger
	// SelfPreservationThreshold is the fraction of the instances that may
	// miss their renewals at once before self-preservation holds their
	// expirations (see preserve.go; default 0.5, negative disables it).
	SelfPreservationThreshold float64
	// SelfPreservationMin is the smallest number of instances at which
	// self-preservation applies (default 10; negative disables it).
	SelfPreservationMin int
	// Resumable makes watchers' events carry Event.Position and enables
	// WatchFrom: for a source whose log positions are stable across
	// processes (both SQL backends), not one that numbers its changes
	// itself.
	Resumable bool
}

// Stats is a snapshot of a hub's state, for metrics and tests.
type Stats = switchboard.WatchStats

const (
	renewOverlap = time.Second // re-read renewals this far back: commits land after their timestamps
	readTimeout  = 10 * time.Second
	minRetry     = 100 * time.Millisecond
	maxRetry     = 2 * time.Second
)

// Hub mirrors one catalog for a whole process and fans its changes out to
// every watcher.
type Hub struct {
	src    Source
	opts   Options
	log    *slog.Logger
	ctx    context.Context // cancelled by Close: aborts reads in flight
	cancel context.CancelFunc

	// startMu serialises the first Watch's snapshot read; started is
	// read without it, so that writers (Publish) never wait on that read.
	startMu sync.Mutex
	started atomic.Bool
	pumps   sync.WaitGroup // one per watcher; Close waits for them
	resyncs sync.WaitGroup // the full resync in flight, if any
	kick    chan struct{}
	done    chan struct{}
	stopped chan struct{}
	close   sync.Once

	mu      sync.Mutex
	entries map[string]*entry
	// order is the entries sorted by name then id, maintained lazily: an
	// entry added or renamed waits in moved, a deleted one is only marked
	// gone (counted in dropped) until the next Watch merges them (sorted).
	order   []*entry
	moved   []*entry
	dropped int
	gen     uint64 // generation of the last snapshot applied or reconciled
	// touched holds the ids the log changed while a full resync is in
	// flight (nil when none is; see resync.go).
	touched map[string]struct{}
	subs    map[*sub]struct{}
	dl      deadlines
	bulk    bool // applying a snapshot: dl is heapified after it, not per item
	// The cursor (see Cursor): seq, read and missing; gaps says since when
	// each missing number has been waited for.
	seq     int64
	read    int64
	missing []int64
	last    Mark
	gaps    map[int64]*gap
	// rev is, for a source whose revisions are not its log positions, the
	// highest revision its reads reflect (Snapshot.Revision,
	// Batch.Revision); 0 for the others.
	rev   int64
	epoch string // the history seq belongs to (Snapshot.Epoch)
	// tombs holds the position of each recent deletion (see versions.go);
	// reading counts the loop's snapshot reads in flight, which keep them.
	tombs   map[string]int64
	reading int
	// force is set while a snapshot of another history is applied: its
	// versions are not comparable with the mirror's, and it rules.
	force bool
	// The catalog clock: catalog time clockNow was read at local
	// (monotonic) time clockLocal.
	clockNow, clockLocal time.Time
	renewedAt            time.Time // catalog time of the last renewal read
	healthy              bool
	lastErr              error
	// recheckAt (local) is when the renewals are read again after an
	// expiry, so that an instance expired because its renewal committed
	// after the read is revived without waiting for another deadline.
	recheckAt time.Time
	preserve
}

// entry is the mirror's state of one instance. inst is never modified once
// the entry points at it (a change replaces the pointer), so watchers'
// snapshots and events share it instead of copying it.
type entry struct {
	inst     *switchboard.Instance
	deadline time.Time // catalog time: LastSeen + TTL
	// notBefore (catalog time) is the end of the entry's own grace after
	// an outage: recovery + its TTL.
	notBefore time.Time
	expired   bool
	expiredAt time.Time // catalog time the hub expired it
	// gone is set when the entry leaves the mirror, reorder while it waits
	// in Hub.moved for its place in Hub.order (see sorted).
	gone, reorder bool
	mark          uint64 // resync generation that last saw it (see resync.go)
	// digest is the source's digest of the row inst was decoded from
	// (Part.Digests), 0 when unknown: any change of inst but its LastSeen
	// sets it to 0 until a resync reads the row again.
	digest uint64
}

// due is when the entry may expire: its deadline, or the end of its grace.
func (e *entry) due() time.Time {
	if e.notBefore.After(e.deadline) {
		return e.notBefore
	}
	return e.deadline
}

// New returns a hub reading src. It starts reading at the first Watch.
func New(src Source, opts Options) *Hub {
	if opts.PollInterval <= 0 {
		opts.PollInterval = switchboard.DefaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SelfPreservationMin == 0 {
		opts.SelfPreservationMin = DefaultSelfPreservationMin
	}
	if opts.SelfPreservationThreshold == 0 {
		opts.SelfPreservationThreshold = DefaultSelfPreservationThreshold
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{
		ctx:     ctx,
		cancel:  cancel,
		src:     src,
		opts:    opts,
		log:     opts.Logger,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		entries: make(map[string]*entry),
		subs:    make(map[*sub]struct{}),
		healthy: true,
	}
}

// Notify tells the hub the catalog may have changed; it reads the change log
// at once. It never blocks.
func (h *Hub) Notify() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Publish hands the hub a write this process has just committed (or one
// another process announced), so its watchers hear of it without a read of
// the log. Changes that carry versions are applied at once, each where it
// is newer than the mirror's state (versions.go), in any order; the
// cursor moves with them only when they directly follow it. Changes
// without versions are applied only when they directly follow the cursor
// (b.Changes[0].Seq == last + 1). Before the first Watch, or otherwise, it
// is only a Notify: the log brings the change. The hub keeps its own copy
// of each instance: the caller (and whoever it returned the instance to)
// may go on using its maps.
func (h *Hub) Publish(b Batch) {
	if h.started.Load() && len(b.Changes) > 0 {
		h.mu.Lock()
		if h.healthy && b.Epoch == h.epoch {
			follows := len(h.missing) == 0 && b.Changes[0].Seq == max(h.read, h.seq)+1
			if follows || versioned(b.Changes) {
				h.setClock(b.Now)
				h.applyChanges(cloneBatch(b).Changes, b.Now)
			}
			if follows {
				last := b.Changes[len(b.Changes)-1].Seq
				h.mark(b.Changes)
				h.advance(last, last, nil)
			}
		}
		h.mu.Unlock()
	}
	// The loop re-reads from its cursor (usually nothing) and re-arms its
	// expiry timer for what was just applied.
	h.Notify()
}

// Close stops the hub and closes every watcher's channel. It is idempotent.
func (h *Hub) Close() {
	h.close.Do(func() {
		h.mu.Lock() // a Watch in progress either sees done or is counted in pumps
		close(h.done)
		h.mu.Unlock()
		h.cancel()
		h.startMu.Lock() // a first read in flight (aborted by cancel) ends
		started := h.started.Load()
		h.startMu.Unlock()
		if started {
			<-h.stopped
		}
		h.pumps.Wait()
		h.resyncs.Wait()
	})
}

// Stats returns the hub's current state.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Stats{Instances: len(h.entries), Watchers: len(h.subs), Healthy: h.healthy, LastError: h.lastErr,
		Preserving: h.preserving, HeldExpirations: h.held, SelfPreservationEvents: h.preserveEvents,
		MissedRenewals: h.missed}
	s.WaitingFor, s.WaitingSince = h.oldestMissing()
	for _, e := range h.entries {
		if !e.expired {
			s.Active++
		}
		switch {
		case e.inst.Draining:
			s.Draining++
		case e.inst.Health.Status == switchboard.StatusCritical:
			s.Critical++
		}
	}
	return s
}

// Watch streams the instances selected by q, as Catalog.Watch documents.
func (h *Hub) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	s, err := h.newWatcher(ctx, q)
	if err != nil {
		return nil, err
	}
	// The current set, in name and id order, is handed to the watcher's
	// pump as shared, immutable instances: nothing is copied per watcher.
	for _, e := range h.sorted() {
		if s.visible(e.inst, e.expired) {
			s.initial = append(s.initial, snapItem{e.inst, e.expired})
		}
	}
	h.subs[s] = struct{}{}
	h.startPump(ctx, s, h.position())
	return s.out, nil
}

// newWatcher starts the hub if it has not started and returns a new
// watcher of q with h.mu held, or an error (h.mu not held).
func (h *Hub) newWatcher(ctx context.Context, q switchboard.Query) (*sub, error) {
	if err := h.start(ctx); err != nil {
		return nil, err
	}
	h.mu.Lock()
	select {
	case <-h.done:
		h.mu.Unlock()
		return nil, switchboard.ErrClosed
	default:
	}
	return newSub(q), nil
}

// startPump ends s's markers with Synced at position pos (and an Error
// while the catalog is unreachable) and starts its pump; it releases h.mu.
func (h *Hub) startPump(ctx context.Context, s *sub, pos string) {
	s.marks = append(s.marks, switchboard.Event{Kind: switchboard.EventSynced, Position: pos})
	if !h.healthy {
		s.marks = append(s.marks, switchboard.Event{Kind: switchboard.EventError, Err: h.lastErr})
	}
	h.pumps.Add(1)
	h.mu.Unlock()
	go h.pump(ctx, s)
}

func (h *Hub) start(ctx context.Context) error {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	select {
	case <-h.done:
		return switchboard.ErrClosed
	default:
	}
	if h.started.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel) // Close aborts a first read in flight
	defer stop()
	if st, ok := h.src.(Streamer); ok {
		if err := h.streamFirst(ctx, st); err != nil {
			return fmt.Errorf("read catalog: %w", err)
		}
	} else {
		snap, err := h.src.Snapshot(ctx)
		if err != nil {
			return fmt.Errorf("read catalog: %w", err)
		}
		h.mu.Lock()
		h.applySnapshot(snap)
		h.renewedAt = snap.Now
		h.mu.Unlock()
	}
	h.started.Store(true)
	go h.run()
	return nil
}

func (h *Hub) run() {
	defer close(h.stopped)
	poll := time.NewTimer(resyncAfter(h.opts.PollInterval))
	defer poll.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	retry := minRetry
	for {
		h.mu.Lock()
		next, ok := h.nextWake()
		healthy := h.healthy
		h.mu.Unlock()
		var d time.Duration
		switch {
		case !healthy:
			d = retry
		case ok:
			d = max(time.Until(next), 0)
		default:
			d = time.Hour
		}
		wake.Reset(d)
		select {
		case <-h.done:
			return
		case <-h.kick:
			if !healthy {
				// Wait for the retry timer: an unreachable catalog is not
				// hammered by every file change or notification.
				select {
				case <-wake.C:
				case <-h.done:
					return
				}
			}
		case <-poll.C:
			poll.Reset(resyncAfter(h.opts.PollInterval))
			h.startResync() // in the background; the log is read now as usual
		case <-wake.C:
		}
		wake.Stop()
		switch err := h.step(); {
		case err == nil, healthy:
			retry = minRetry
		default:
			retry = min(retry*2, maxRetry)
		}
	}
}

// step reads the log (or a full snapshot when the log no longer holds the
// hub's position), then the renewals when an expiry is due, and expires
// what is due.
func (h *Hub) step() error {
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	h.mu.Lock()
	cur, epoch := h.cursor(), h.epoch
	recovering := !h.healthy
	h.mu.Unlock()

	var snap *Snapshot
	var batch Batch
	var err error
	reset := false // the log no longer holds our cursor: the snapshot rules
	batch, err = h.src.ChangesSince(ctx, cur)
	if errors.Is(err, ErrCursorGone) || (err == nil && batch.Epoch != epoch) {
		// Trimmed past the cursor, or another history (the catalog was
		// re-created or restored): its entries say nothing about ours.
		reset = true
	} else if err != nil {
		return h.fail(err)
	}
	if reset {
		// Tombstones stay while the read is in flight: its rows may
		// predate a deletion applied meanwhile (versions.go).
		h.mu.Lock()
		h.reading++
		h.mu.Unlock()
		s, err := h.src.Snapshot(ctx)
		h.mu.Lock()
		h.reading--
		h.mu.Unlock()
		if err != nil {
			return h.fail(err)
		}
		snap = &s
	}
	h.mu.Lock()
	if snap != nil {
		h.applySnapshot(*snap)
	} else {
		h.applyBatch(batch)
	}
	if recovering {
		h.recovered()
	}
	recheck := !h.recheckAt.IsZero() && !time.Now().Before(h.recheckAt)
	rejudge := h.preserving && !time.Now().Before(h.preserveUntil)
	due := h.dueNow() || recheck || rejudge
	since := h.renewedAt.Add(-renewOverlap)
	h.mu.Unlock()
	if !due {
		return nil
	}
	renewals, now, err := h.src.RenewedSince(ctx, since)
	if err != nil {
		return h.fail(err)
	}
	h.mu.Lock()
	h.setClock(now)
	h.renewedAt = now
	if recheck {
		h.recheckAt = time.Time{}
	}
	for _, r := range renewals {
		if e := h.entries[r.ID]; e != nil {
			h.renew(e, r.LastSeen, now)
		}
	}
	h.expire(now)
	h.mu.Unlock()
	return nil
}

// renew takes a renewal of e's instance, last seen at lastSeen, read at
// catalog time now, when it is newer than the mirror's.
func (h *Hub) renew(e *entry, lastSeen, now time.Time) {
	if !lastSeen.After(e.inst.LastSeen) {
		return
	}
	wasExpired := e.expired
	renewed := *e.inst // shared maps and slices: only LastSeen changes
	renewed.LastSeen = lastSeen
	e.inst = &renewed
	h.refresh(e, now, false)
	if wasExpired && !e.expired {
		// Only a revival is news: a renewal of a live entry is not.
		h.transition(e.inst, true, e.inst, false, "", 0)
	}
}

// cloneBatch copies the instances of b, so that the hub's mirror shares no
// map or slice with a backend's caller.
func cloneBatch(b Batch) Batch {
	changes := make([]Change, len(b.Changes))
	for i, c := range b.Changes {
		if c.Found {
			c.Instance = c.Instance.Clone()
		}
		changes[i] = c
	}
	b.Changes = changes
	return b
}

func (h *Hub) fail(err error) error {
	if h.ctx.Err() != nil {
		return err // closing: our own cancellation, not an outage
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.healthy {
		h.healthy = false
		h.lastErr = err
		h.log.Warn("catalog unreachable: serving the last known set", "err", err, "instances", len(h.entries))
		for s := range h.subs {
			s.mark(switchboard.Event{Kind: switchboard.EventError, Err: err})
		}
	}
	return err
}

// recovered marks the catalog reachable again. Each instance gets its own
// TTL from now to heartbeat before anyone calls it dead (not the largest TTL
// in the catalog: one instance with a TTL of a day would keep every dead
// instance for a day).
func (h *Hub) recovered() {
	h.healthy = true
	h.lastErr = nil
	now := h.catalogNow()
	for _, e := range h.entries {
		if e.expired {
			continue
		}
		if nb := now.Add(e.inst.TTL); nb.After(e.deadline) && !nb.Equal(e.due()) {
			e.notBefore = nb
			h.schedule(item{nb, e.inst.ID})
		}
	}
	h.log.Info("catalog reachable again: each instance may expire only after one more TTL of its own")
	for s := range h.subs {
		s.mark(switchboard.Event{Kind: switchboard.EventSynced, Position: h.position()})
	}
}

func (h *Hub) setClock(now time.Time) {
	h.clockNow, h.clockLocal = now, time.Now()
}

func (h *Hub) catalogNow() time.Time {
	return h.clockNow.Add(time.Since(h.clockLocal))
}

func (h *Hub) applySnapshot(s Snapshot) {
	// A snapshot of another history rules: its versions say nothing
	// against the mirror's.
	h.force = s.Epoch != h.epoch
	defer func() { h.force = false }()
	if h.force {
		clear(h.tombs)
	}
	h.beginSnapshot(s.Now, len(s.Instances))
	h.applyPart(s.Instances, nil, s.Now)
	h.endSnapshot(s)
}

// beginSnapshot starts applying a snapshot of about rows instances read at
// catalog time now: the parts follow (applyPart), then endSnapshot.
func (h *Hub) beginSnapshot(now time.Time, rows int) {
	h.setClock(now)
	h.gen++
	if len(h.entries) == 0 && rows > 0 {
		// A first snapshot (a new process's): size the map once instead of
		// growing it through every power of two.
		h.entries = make(map[string]*entry, rows)
	}
	// The deadlines are gathered unordered and heapified once at the end:
	// O(n) instead of n pushes.
	h.bulk = true
	h.dl = slices.Grow(h.dl, rows)
}

// applyPart applies some of a snapshot's instances, which the hub owns from
// now on (its entries point into them), with their digests (Part.Digests;
// nil: none).
func (h *Hub) applyPart(ins []switchboard.Instance, digests []uint64, now time.Time) {
	for i := range ins {
		in := &ins[i]
		e := h.put(in, now)
		if e == nil {
			continue // deleted since the read: a tombstone says so
		}
		e.mark = h.gen
		if digests != nil && e.inst == in {
			e.digest = digests[i]
		}
	}
}

// endSnapshot ends a snapshot (s's position and clock; its instances are
// applied): what it did not hold was deleted while the hub was not looking.
func (h *Hub) endSnapshot(s Snapshot) {
	h.bulk = false
	heap.Init(&h.dl)
	h.dropUnseen(h.gen, s.Now, reflected(s.Seq, s.Read, s.Missing, s.Revision), nil)
	h.epoch = s.Epoch
	h.seq, h.read, h.last = 0, 0, s.Last // a snapshot sets the cursor, forward or back
	h.rev = s.Revision
	h.advance(s.Seq, s.Read, s.Missing)
}

// applyBatch applies a batch read from the log and moves the cursor to
// where the read ended. The batch may overlap what Publish applied
// meanwhile: versions (or, without them, the cursor) keep that from
// going back.
func (h *Hub) applyBatch(b Batch) {
	h.setClock(b.Now)
	h.applyChanges(b.Changes, b.Now)
	h.mark(b.Changes)
	h.rev = max(h.rev, b.Revision)
	h.advance(b.Seq, b.Read, b.Missing)
}

// mark makes the highest of cs that says when it was written the cursor's
// Last, when it is above it.
func (h *Hub) mark(cs []Change) {
	for i := range cs {
		if c := &cs[i]; c.Seq > h.last.Seq && !c.At.IsZero() {
			h.last = Mark{Seq: c.Seq, ID: c.ID, At: c.At}
		}
	}
}

// upsert makes in (which the hub owns from now on and never modifies
// after this call) the state of its entry, and returns the entry.
func (h *Hub) upsert(in *switchboard.Instance, now time.Time) *entry {
	in.Stale = false
	e := h.entries[in.ID]
	if e == nil {
		e = &entry{inst: in}
		h.refresh(e, now, true)
		h.entries[in.ID] = e
		h.reposition(e)
		h.transition(nil, false, e.inst, e.expired, "", 0)
		return e
	}
	old, oldExpired := e.inst, e.expired
	if in.LastSeen.Before(old.LastSeen) {
		in.LastSeen = old.LastSeen
	}
	e.inst, e.digest = in, 0 // the caller knows in's digest, if anyone
	if in.Name != old.Name {
		h.reposition(e)
	}
	h.refresh(e, now, false)
	h.transition(old, oldExpired, e.inst, e.expired, "", 0)
	return e
}

// dropUnseen removes the entries that generation gen, read at catalog time
// now and reflecting the log as sees says, did not see (mark) and keep
// does not hold: deleted while the hub was not looking. An entry whose
// version the read did not reflect (written after it, or by a writer
// still in flight then) stays. A row past its TTL was reaped (expired);
// why any other left, the read cannot tell (unknown): the log that said it
// was trimmed, or belongs to another history.
func (h *Hub) dropUnseen(gen uint64, now time.Time, sees func(rev int64) bool, keep map[string]struct{}) {
	for id, e := range h.entries {
		if _, k := keep[id]; k || e.mark == gen || (!h.force && !sees(e.inst.Revision)) {
			continue
		}
		reason := switchboard.ReasonUnknown
		if e.expired || !now.Before(e.deadline) {
			reason = switchboard.ReasonExpired
		}
		// Deleted after the version the mirror holds: no state up to it
		// may bring the instance back.
		if !h.force {
			h.tomb(id, e.inst.Revision)
		}
		h.delete(id, reason, 0)
	}
}

// reflected returns whether a read at cursor (seq, read, missing) reflects
// the change at revision rev: at or below read and not missing (0, an
// unknown revision, always). For a source whose revisions are not its log
// positions, upTo is the highest revision the read reflects (see
// Snapshot.Revision), and the cursor says nothing about revisions.
func reflected(seq, read int64, missing []int64, upTo int64) func(rev int64) bool {
	if upTo != 0 {
		return func(rev int64) bool { return rev <= upTo }
	}
	read = max(read, seq)
	return func(rev int64) bool {
		if rev > read {
			return false
		}
		_, in := slices.BinarySearch(missing, rev)
		return !in
	}
}

// delete removes id's entry; rev is the deletion's log position (0 when
// the hub judged it without the log), for the watchers' events.
func (h *Hub) delete(id string, reason switchboard.Reason, rev int64) {
	e := h.entries[id]
	if e == nil {
		return
	}
	delete(h.entries, id)
	e.gone = true
	h.dropped++
	h.tidyOrder()
	h.transition(e.inst, e.expired, nil, false, reason, rev)
}
