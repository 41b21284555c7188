package hub

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/switchboard-io/switchboard"
)

// The periodic full resync (every PollInterval) is a safety net: the change
// log already brings every change. It reads the whole catalog in the
// background, while the loop goes on reading the log and Publish goes on
// applying writes, and reconciles the mirror with it by difference, a
// chunk at a time under h.mu: part by part as the source reads them when
// it is a Streamer, after the whole read otherwise. Live changes never
// wait behind it.
//
// A row whose content the mirror holds is only renewed (a newer
// last_seen): the resync takes that for an entry the mirror holds expired
// (a revival the log did not bring) and leaves a live entry's renewals to
// the renewal read (step), which the hub makes before it expires anything.
// So a resync of a heartbeating catalog copies no instance.
//
// Exactness: an instance the log touched while the resync was in flight
// (touched) is left to the log, whose entries are read with the row as it
// is at that read, so the mirror's state of it is never older than the
// snapshot's would be, and any later change has a log entry still to come.
// Any other instance's mirror state was read before the snapshot; a change
// the snapshot shows that the mirror lacks has a log entry the hub has not
// read yet, so taking the snapshot's state only brings forward what the log
// will bring anyway, and undoes nothing newer.

// resyncAfter returns the wait before the next full resync: every less up
// to a fifth of it, drawn anew each time. Processes started together (a
// fleet's deploy) thus drift apart instead of reading the whole catalog
// at the same moment every period, and no change the log missed waits for
// the safety net longer than every.
func resyncAfter(every time.Duration) time.Duration {
	return every - time.Duration(rand.Int64N(int64(every/5)+1))
}

// resyncChunk bounds the instances reconciled per hold of h.mu.
const resyncChunk = 1024

// startResync starts a full resync in the background unless one is
// running.
func (h *Hub) startResync() {
	if h.beginResync() {
		go func() {
			defer h.endResync()
			h.resync()
		}()
	}
}

// Resync runs one full resync in the caller's goroutine, as the periodic
// one does, and returns once it is reconciled (tests and benchmarks). It
// does nothing before the first Watch, after Close, while the catalog is
// unreachable, or while another resync is in flight.
func (h *Hub) Resync() {
	if h.started.Load() && h.beginResync() {
		defer h.endResync()
		h.resync()
	}
}

// beginResync claims the one resync that may run, unless another is
// running, the catalog is down (the loop retries) or the hub is closed.
func (h *Hub) beginResync() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.touched != nil || !h.healthy {
		return false
	}
	select {
	case <-h.done:
		return false
	default:
	}
	// Tracking starts before the snapshot is read (see above).
	h.touched = make(map[string]struct{})
	h.resyncs.Add(1)
	return true
}

// endResync ends the resync beginResync claimed.
func (h *Hub) endResync() {
	h.mu.Lock()
	h.touched = nil
	h.pruneTombs()
	h.mu.Unlock()
	h.resyncs.Done()
}

// touch records that the log changed id while a resync is in flight.
func (h *Hub) touch(id string) {
	if h.touched != nil {
		h.touched[id] = struct{}{}
	}
}

// errOtherEpoch ends a streamed resync whose catalog has another history
// than the hub's cursor: the catalog is then read whole and applied as a
// snapshot.
var errOtherEpoch = errors.New("the catalog's epoch changed")

// errSuperseded ends a resync when the loop applied a whole snapshot
// meanwhile.
var errSuperseded = errors.New("a snapshot was applied meanwhile")

func (h *Hub) resync() {
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	var err error
	if st, ok := h.src.(Streamer); ok {
		err = h.resyncStreamed(ctx, st)
	} else {
		err = h.resyncWhole(ctx)
	}
	if err != nil && !errors.Is(err, errSuperseded) && h.ctx.Err() == nil {
		// The loop's own reads judge whether the catalog is reachable.
		h.log.Warn("catalog resync: read failed; the change log goes on", "err", err)
	}
}

// resyncWhole reads the whole catalog, then reconciles the mirror with it.
func (h *Hub) resyncWhole(ctx context.Context) error {
	snap, err := h.src.Snapshot(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if snap.Epoch != h.epoch {
		// Another history: the log's positions mean nothing; the snapshot
		// rules (as when the loop finds its cursor gone).
		h.applySnapshot(snap)
		h.mu.Unlock()
		return nil
	}
	h.gen++
	gen := h.gen
	h.mu.Unlock()
	if !h.reconcile(snap.Instances, nil, snap.Now, gen) {
		return errSuperseded
	}
	h.sweep(gen, snap.Now, reflected(snap.Seq, snap.Read, snap.Missing, snap.Revision))
	return nil
}

// resyncStreamed reconciles the mirror with a Streamer's snapshot part by
// part as the source reads it, so that the catalog's rows are garbage a
// part at a time instead of held whole beside the mirror until the end:
// at 100,000 instances the whole read is as large as the mirror. A source
// that digests its rows asks held first, and leaves out, undecoded, each
// row the mirror holds as stored. A catalog of another epoch is read
// again whole (resyncWhole).
func (h *Hub) resyncStreamed(ctx context.Context, st Streamer) error {
	var (
		gen   uint64
		begun bool
		now   time.Time
		sees  func(int64) bool
	)
	// begin starts the generation at the read's first row or part (both
	// come from the source's goroutine, in order).
	begin := func(head *Part) error {
		if begun {
			return nil
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if head.Epoch != h.epoch {
			return errOtherEpoch
		}
		h.gen++
		gen, begun, now, sees = h.gen, true, head.Now, reflected(head.Seq, head.Read, head.Missing, head.Revision)
		return nil
	}
	held := func(head *Part, id string, digest uint64, lastSeen time.Time) bool {
		if begin(head) != nil {
			return false // decoded and handed over, where emit ends the read
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.gen != gen {
			return false
		}
		if _, t := h.touched[id]; t {
			return true // left to the log, as reconcile would (sweep keeps it)
		}
		e := h.entries[id]
		if e == nil || e.digest != digest {
			return false
		}
		h.keep(e, lastSeen, now, gen)
		return true
	}
	err := st.StreamSnapshot(ctx, held, func(p Part) error {
		if err := begin(&p); err != nil {
			return err
		}
		if !h.reconcile(p.Instances, p.Digests, now, gen) {
			return errSuperseded
		}
		return nil
	})
	switch {
	case errors.Is(err, errOtherEpoch):
		return h.resyncWhole(ctx)
	case err != nil:
		return err
	case !begun:
		return errNoParts
	}
	h.sweep(gen, now, sees)
	return nil
}

// reconcile takes from ins, read at catalog time now, what differs from
// the mirror, resyncChunk instances per hold of h.mu, and keeps each
// one's digest (nil: none); false when the loop applied a whole snapshot
// meanwhile (generation gen is then over). An instance taken is copied out
// of ins, so that the mirror never keeps the read's rows alive for one of
// them.
func (h *Hub) reconcile(ins []switchboard.Instance, digests []uint64, now time.Time, gen uint64) bool {
	for i := 0; i < len(ins); i += resyncChunk {
		h.mu.Lock()
		if h.gen != gen {
			h.mu.Unlock()
			return false
		}
		for j := i; j < min(i+resyncChunk, len(ins)); j++ {
			in := &ins[j]
			if _, t := h.touched[in.ID]; t {
				continue
			}
			e := h.entries[in.ID]
			if e != nil && sameContent(e.inst, in) {
				h.keep(e, in.LastSeen, now, gen)
			} else {
				c := *in
				if e = h.put(&c, now); e == nil {
					continue // deleted since the read
				}
				e.mark = gen
				if e.inst != &c {
					continue // the mirror's state is newer than the read's
				}
			}
			if digests != nil {
				e.digest = digests[j]
			}
		}
		h.mu.Unlock()
	}
	return true
}

// keep counts e as seen by generation gen, whose read (at catalog time
// now) found its row as the mirror holds it, last seen at lastSeen: a
// newer last_seen is taken only where it revives an entry the mirror holds
// expired (see above), whether the row was decoded or held.
func (h *Hub) keep(e *entry, lastSeen, now time.Time, gen uint64) {
	if e.expired {
		h.renew(e, lastSeen, now)
	}
	e.mark = gen
}

// sweep ends generation gen's reconciliation, read at catalog time now
// and reflecting the log as sees says: an entry it did not see and the log
// did not touch was deleted while the hub was not looking.
func (h *Hub) sweep(gen uint64, now time.Time, sees func(rev int64) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen == gen {
		h.dropUnseen(gen, now, sees, h.touched)
	}
}
