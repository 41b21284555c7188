package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Positions (Event.Position) are "<seq>@<epoch>", then, when the cursor
// has one, "#<seq>,<µs>,<id>", its mark (Cursor.Last): the cursor's Seq
// when the event was made, the catalog's history, and the entry read last,
// which a resume checks is still in the log (a catalog restored under the
// same epoch is another history). Every change at or below
// Seq was applied to the mirror before, so its events were queued to the
// watcher before this one: a watch resumed from the position misses
// nothing. Only events that are such a point carry one (a live change, a
// Synced); those of an initial snapshot or of a catch-up before its end do
// not.

// position is the watchers' resume point now ("" unless Resumable; h.mu
// held).
func (h *Hub) position() string {
	if !h.opts.Resumable {
		return ""
	}
	return formatPosition(h.seq, h.epoch, h.last)
}

func formatPosition(seq int64, epoch string, m Mark) string {
	p := strconv.FormatInt(seq, 10) + "@" + epoch
	if m.Seq > 0 {
		p += "#" + strconv.FormatInt(m.Seq, 10) + "," + strconv.FormatInt(m.At.UnixMicro(), 10) + "," + m.ID
	}
	return p
}

// parsePosition splits a position; ok is false for a malformed one.
func parsePosition(p string) (seq int64, epoch string, m Mark, ok bool) {
	p, mark, marked := strings.Cut(p, "#")
	s, epoch, found := strings.Cut(p, "@")
	if !found {
		return 0, "", Mark{}, false
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 0 {
		return 0, "", Mark{}, false
	}
	if marked {
		parts := strings.SplitN(mark, ",", 3)
		if len(parts) != 3 || parts[2] == "" {
			return 0, "", Mark{}, false
		}
		ms, err1 := strconv.ParseInt(parts[0], 10, 64)
		us, err2 := strconv.ParseInt(parts[1], 10, 64)
		if err1 != nil || err2 != nil || ms <= 0 {
			return 0, "", Mark{}, false
		}
		m = Mark{Seq: ms, At: time.UnixMicro(us).UTC(), ID: parts[2]}
	}
	return seq, epoch, m, true
}

// resumeRead is how many log reads WatchFrom makes at most to reach the
// hub's own position; past it, live changes (queued meanwhile) bring the
// rest.
const resumeRead = 64

// WatchFrom streams the instances selected by q from position on, as
// switchboard.WatchResumer documents. The watcher is subscribed first (its
// live changes queue while the log is read), then the log after position
// is read to the hub's own position, and each instance it names is sent
// as the mirror holds it (or its removal, with the log's reason), then
// Synced, then the queued changes.
func (h *Hub) WatchFrom(ctx context.Context, q switchboard.Query, position string) (<-chan switchboard.Event, error) {
	floor, epoch, mark, ok := parsePosition(position)
	if !h.opts.Resumable || !ok {
		return nil, fmt.Errorf("%w: %q is not a position this catalog's watches gave", switchboard.ErrPositionGone, position)
	}
	s, err := h.newWatcher(ctx, q)
	if err != nil {
		return nil, err
	}
	if epoch != h.epoch {
		h.mu.Unlock()
		return nil, fmt.Errorf("%w: position of another history than the catalog's", switchboard.ErrPositionGone)
	}
	target, at := max(h.read, h.seq), h.seq
	h.subs[s] = struct{}{} // its changes queue from now; no pump yet
	h.mu.Unlock()

	last, err := h.readSince(ctx, Cursor{Seq: floor, Read: floor, Last: mark}, epoch, target)
	h.mu.Lock()
	if err != nil {
		delete(h.subs, s)
		h.mu.Unlock()
		return nil, err
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(last[a].Seq, last[b].Seq) })
	for _, id := range ids {
		s.marks = append(s.marks, h.resumeEvent(s, id, last[id]))
	}
	h.startPump(ctx, s, formatPosition(max(at, floor), epoch, h.last))
	return s.out, nil
}

// readSince reads the log from cur (its mark checked by the source) up to
// target (at most resumeRead reads) and returns the last change of each
// instance it names.
func (h *Hub) readSince(ctx context.Context, cur Cursor, epoch string, target int64) (map[string]Change, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	last := make(map[string]Change)
	for range resumeRead {
		b, err := h.src.ChangesSince(ctx, cur)
		switch {
		case errors.Is(err, ErrCursorGone):
			return nil, fmt.Errorf("%w: %v", switchboard.ErrPositionGone, err)
		case err != nil:
			return nil, fmt.Errorf("read the change log: %w", err)
		case b.Epoch != epoch:
			return nil, fmt.Errorf("%w: the catalog's history changed", switchboard.ErrPositionGone)
		}
		for _, c := range b.Changes {
			if p, ok := last[c.ID]; !ok || c.Seq > p.Seq {
				last[c.ID] = c
			}
		}
		read := max(b.Read, b.Seq)
		if len(b.Changes) == 0 || read >= target {
			break
		}
		cur = Cursor{Seq: b.Seq, Read: read, Missing: b.Missing, Last: cur.Last}
	}
	return last, nil
}

// resumeEvent is what a resumed watcher s is told of id, whose last change
// after its position is c (h.mu held): its state now, or its removal.
func (h *Hub) resumeEvent(s *sub, id string, c Change) switchboard.Event {
	if e := h.entries[id]; e != nil {
		if s.visible(e.inst, e.expired) {
			return switchboard.Event{Kind: switchboard.EventUpdated, Instance: e.view(), Revision: e.inst.Revision}
		}
		r := switchboard.ReasonDeregistered // no longer matches the query
		if e.expired {
			r = switchboard.ReasonExpired
		}
		return switchboard.Event{Kind: switchboard.EventRemoved, Reason: r, Instance: e.view(), Revision: e.inst.Revision}
	}
	r, rev := switchboard.ReasonUnknown, int64(0)
	if c.Deleted && c.Reason != "" {
		r, rev = c.Reason, c.version()
	}
	return switchboard.Event{Kind: switchboard.EventRemoved, Reason: r, Instance: switchboard.Instance{ID: id}, Revision: rev}
}
