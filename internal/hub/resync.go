package hub

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/switchboard-io/switchboard"
)

// The periodic full resync (every PollInterval) is a safety net: the change
// log already brings every change. It reads the whole catalog in the
// background, while the loop goes on reading the log and Publish goes on
// applying writes, then reconciles the mirror with it by difference, a
// chunk at a time under h.mu. Live changes never wait behind it.
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

// startResync starts a full resync unless one is running.
func (h *Hub) startResync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.touched != nil || !h.healthy {
		return // one at a time; while the catalog is down the loop retries
	}
	select {
	case <-h.done:
		return
	default:
	}
	// Tracking starts before the snapshot is read (see above).
	h.touched = make(map[string]struct{})
	h.resyncs.Add(1)
	go func() {
		defer h.resyncs.Done()
		h.resync()
		h.mu.Lock()
		h.touched = nil
		h.mu.Unlock()
	}()
}

// touch records that the log changed id while a resync is in flight.
func (h *Hub) touch(id string) {
	if h.touched != nil {
		h.touched[id] = struct{}{}
	}
}

func (h *Hub) resync() {
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	snap, err := h.src.Snapshot(ctx)
	if err != nil {
		// The loop's own reads judge whether the catalog is reachable.
		if h.ctx.Err() == nil {
			h.log.Warn("catalog resync: read failed; the change log goes on", "err", err)
		}
		return
	}
	h.mu.Lock()
	if snap.Epoch != h.epoch {
		// Another history: the log's positions mean nothing; the snapshot
		// rules (as when the loop finds its cursor gone).
		h.applySnapshot(snap)
		h.mu.Unlock()
		return
	}
	h.gen++
	gen := h.gen
	h.mu.Unlock()
	for i := 0; i < len(snap.Instances); i += resyncChunk {
		h.mu.Lock()
		if h.gen != gen { // the loop applied a whole snapshot meanwhile
			h.mu.Unlock()
			return
		}
		for j := i; j < min(i+resyncChunk, len(snap.Instances)); j++ {
			in := &snap.Instances[j]
			e := h.entries[in.ID]
			if _, t := h.touched[in.ID]; t {
				continue
			}
			if e != nil && !in.LastSeen.After(e.inst.LastSeen) && sameContent(e.inst, in) {
				e.mark = gen // unchanged: nothing to do
				continue
			}
			h.upsert(in, snap.Now).mark = gen
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return
	}
	for id, e := range h.entries {
		if _, t := h.touched[id]; t || e.mark == gen {
			continue
		}
		// Deleted while we were not looking: a row past its TTL was reaped,
		// anything else left.
		reason := switchboard.ReasonDeregistered
		if e.expired || !snap.Now.Before(e.deadline) {
			reason = switchboard.ReasonExpired
		}
		h.delete(id, reason)
	}
}
