package hub

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/switchboard-io/switchboard"
)

// Bounds of one watcher's queue. A watcher whose queue would pass either
// bound falls behind: its queue is folded into one pending change per
// instance, and it is caught up from the mirror once it reads again (see
// sub).
const (
	queueCap     = 1024    // events
	queueBytes   = 8 << 20 // approximate bytes of the queued instances
	catchUpChunk = 256     // events built per catch-up step
)

// sub is one watcher, drained by its own goroutine (pump) so that a slow
// reader never stalls the hub or other watchers.
//
// While it keeps up, each change is queued as an event. When the queue
// passes queueCap events or queueBytes, the watcher falls behind: the queue
// is replaced by pending, which holds for each instance that changed only
// whether the watcher could see it before the first change it missed (and,
// for an instance since deleted, its removal). Further changes only touch
// pending, so memory is bounded by the number of instances, never by the
// number of changes. Once the reader takes what it was handed, pump builds
// the net difference between what the watcher saw and the mirror's present
// state (added, updated or removed, at most one event per instance, in
// chunks), then a Synced marker (or an Error while the catalog is
// unreachable), and the watcher keeps up again. Like etcd's unsynced
// watchers, a slow watcher sees fewer intermediate states, never a wrong
// final one.
type sub struct {
	q     switchboard.Query
	mu    sync.Mutex
	queue []switchboard.Event
	bytes int // approximate size of the instances in queue
	// behind is set while pending, not queue, records this watcher's
	// changes.
	behind  bool
	pending map[string]pend
	// initial is the set the watcher starts from and marks the markers
	// that follow it (Synced, and Error while the catalog is unreachable),
	// handed over before anything queued (only pump reads them).
	initial []snapItem
	marks   []switchboard.Event
	wake    chan struct{}
	out     chan switchboard.Event
}

// snapItem is one instance of a watcher's initial set: the mirror's own
// (immutable) instance and whether it had expired.
type snapItem struct {
	inst    *switchboard.Instance
	expired bool
}

// pend is what a watcher that fell behind saw of one instance.
type pend struct {
	was     bool               // visible before the first missed change
	removal *switchboard.Event // its last removal (for an instance deleted since)
}

func newSub(q switchboard.Query) *sub {
	return &sub{q: q, wake: make(chan struct{}, 1), out: make(chan switchboard.Event, 64)}
}

func (s *sub) visible(in *switchboard.Instance, expired bool) bool { return s.q.Selects(in, expired) }

// change queues the event of one instance (id), which the watcher could
// (was) or could not see before it; removal says the event removes it from
// the watcher's view, gone that it left the mirror. It reports whether the
// watcher has just fallen behind.
func (s *sub) change(id string, was, removal, gone bool, event func() switchboard.Event) (fellBehind bool) {
	s.mu.Lock()
	defer s.wakeUp()
	defer s.mu.Unlock()
	if !s.behind {
		ev := event()
		s.queue = append(s.queue, ev)
		s.bytes += size(&ev.Instance)
		if len(s.queue) <= queueCap && s.bytes <= queueBytes {
			return false
		}
		s.fallBehind()
		return true
	}
	p, seen := s.pending[id]
	if !seen {
		p.was = was
	}
	switch {
	case gone && !p.was:
		// Came and went while the watcher was not reading: nothing to
		// tell, nothing to keep (pending stays bounded by the instances the
		// watcher saw plus those in the mirror, whatever the churn).
		delete(s.pending, id)
		return false
	case removal && p.was:
		ev := event()
		p.removal = &ev
	}
	s.pending[id] = p
	return false
}

// mark queues a marker (Synced or Error). A watcher that is behind gets
// the marker of the hub's state when it is caught up instead.
func (s *sub) mark(ev switchboard.Event) {
	s.mu.Lock()
	if !s.behind {
		s.queue = append(s.queue, ev)
		if len(s.queue) > queueCap { // a flapping catalog and a stalled reader
			s.fallBehind()
		}
	}
	s.mu.Unlock()
	s.wakeUp()
}

func (s *sub) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fallBehind folds the queue into pending: the first event of an instance
// tells whether the watcher saw it before (anything but added means it
// did). Markers are dropped; the catch-up ends with a fresh one.
func (s *sub) fallBehind() {
	s.behind = true
	s.pending = make(map[string]pend)
	for _, ev := range s.queue {
		id := ev.Instance.ID
		switch ev.Kind {
		case switchboard.EventAdded, switchboard.EventUpdated, switchboard.EventRemoved:
		default:
			continue
		}
		p, seen := s.pending[id]
		if !seen {
			p.was = ev.Kind != switchboard.EventAdded
		}
		if ev.Kind == switchboard.EventRemoved && p.was {
			p.removal = &ev
		}
		s.pending[id] = p
	}
	s.queue, s.bytes = nil, 0
}

// catchUp builds the next chunk of a watcher's catch-up from the mirror
// (h.mu held): the net change of up to catchUpChunk pending instances and,
// once none is left, the marker of the hub's state.
func (h *Hub) catchUp(s *sub) []switchboard.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, min(len(s.pending), catchUpChunk))
	for id := range s.pending {
		if len(ids) == catchUpChunk {
			break
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]switchboard.Event, 0, len(ids)+1)
	for _, id := range ids {
		p := s.pending[id]
		delete(s.pending, id)
		e := h.entries[id]
		is := e != nil && s.visible(e.inst, e.expired)
		switch {
		case !p.was && is:
			out = append(out, e.added())
		case p.was && is:
			out = append(out, switchboard.Event{Kind: switchboard.EventUpdated, Instance: e.view(), Revision: e.inst.Revision})
		case p.was && e != nil:
			r := switchboard.RemovalReason(e.inst, e.expired) // or no longer matches the query
			out = append(out, switchboard.Event{Kind: switchboard.EventRemoved, Reason: r, Instance: e.view(), Revision: e.inst.Revision})
		case p.was && p.removal != nil:
			out = append(out, *p.removal)
		}
	}
	if len(s.pending) == 0 {
		s.behind, s.pending = false, nil
		if h.healthy {
			out = append(out, switchboard.Event{Kind: switchboard.EventSynced, Position: h.position()})
		} else {
			out = append(out, switchboard.Event{Kind: switchboard.EventError, Err: h.lastErr})
		}
	}
	return out
}

// pump hands a watcher's queue, or its catch-up, to its reader.
func (h *Hub) pump(ctx context.Context, s *sub) {
	defer h.pumps.Done()
	defer close(s.out)
	defer func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}()
	initial, marks := s.initial, s.marks
	s.initial, s.marks = nil, nil
	for i := range len(initial) + len(marks) {
		var ev switchboard.Event
		if i < len(initial) {
			in := initial[i].inst
			ev = switchboard.Event{Kind: switchboard.EventAdded, Instance: view(in, initial[i].expired), Revision: in.Revision}
		} else {
			ev = marks[i-len(initial)]
		}
		select {
		case s.out <- ev:
		case <-ctx.Done():
			return
		case <-h.done:
			return
		}
	}
	for {
		s.mu.Lock()
		batch, behind := s.queue, s.behind
		s.queue, s.bytes = nil, 0
		s.mu.Unlock()
		if behind {
			h.mu.Lock()
			batch = h.catchUp(s)
			h.mu.Unlock()
		}
		for i := range batch {
			select {
			case s.out <- batch[i]:
				batch[i] = switchboard.Event{} // let the reader own what it took
			case <-ctx.Done():
				return
			case <-h.done:
				return
			}
		}
		if behind {
			continue
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return
		case <-h.done:
			return
		}
	}
}

// size approximates the memory an instance holds.
func size(in *switchboard.Instance) int {
	n := 256 + len(in.ID) + len(in.Name) + len(in.Type) + len(in.Address) + len(in.Version) + len(in.Components)
	for _, c := range in.Capabilities {
		n += 16 + len(c)
	}
	for k, v := range in.Metadata {
		n += 32 + len(k) + len(v)
	}
	return n
}

// transition emits, to every watcher, what changed between the old and the
// new state of one instance (nil: absent).
//
// rev is a removal's own log position (0: judged without the log, as an
// expiry); a removal without one carries the instance's last revision, so
// a watcher's revisions of one instance never decrease.
func (h *Hub) transition(old *switchboard.Instance, oldExpired bool, cur *switchboard.Instance, curExpired bool, reason switchboard.Reason, rev int64) {
	if len(h.subs) == 0 {
		return
	}
	same := old != nil && cur != nil && oldExpired == curExpired && sameContent(old, cur)
	pos := h.position()
	id := ""
	if cur != nil {
		id = cur.ID
	} else if old != nil {
		id = old.ID
	}
	for s := range h.subs {
		was := old != nil && s.visible(old, oldExpired)
		is := cur != nil && s.visible(cur, curExpired)
		var event func() switchboard.Event
		switch {
		case !was && is:
			event = func() switchboard.Event {
				return switchboard.Event{Kind: switchboard.EventAdded, Instance: view(cur, curExpired), Revision: cur.Revision, Position: pos}
			}
		case was && !is:
			r := reason
			if r == "" {
				r = switchboard.RemovalReason(cur, curExpired)
			}
			in := old
			if cur != nil {
				in = cur
			}
			v := max(rev, in.Revision)
			event = func() switchboard.Event {
				return switchboard.Event{Kind: switchboard.EventRemoved, Reason: r, Instance: view(in, curExpired || oldExpired), Revision: v,
					Position: pos}
			}
		case was && is && !same:
			event = func() switchboard.Event {
				return switchboard.Event{Kind: switchboard.EventUpdated, Instance: view(cur, curExpired), Revision: cur.Revision, Position: pos}
			}
		default:
			continue
		}
		if s.change(id, was, was && !is, cur == nil, event) {
			h.log.Warn("watcher fell behind: its queue is full; coalescing its changes per instance until it reads again",
				"queued_events", queueCap, "query", s.q)
		}
	}
}

func sameContent(a, b *switchboard.Instance) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Type == b.Type && a.Address == b.Address &&
		slices.Equal(a.Capabilities, b.Capabilities) && a.Version == b.Version &&
		maps.Equal(a.Metadata, b.Metadata) && string(a.Components) == string(b.Components) &&
		a.TTL == b.TTL && a.RegisteredAt.Equal(b.RegisteredAt) &&
		a.Weight == b.Weight && a.Zone == b.Zone && a.Draining == b.Draining &&
		ptrEqual(a.Check, b.Check) && a.Health.Status == b.Health.Status && a.Health.Output == b.Health.Output &&
		a.Health.Since.Equal(b.Health.Since)
}

func ptrEqual[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// view is what a watcher is handed of an instance of the mirror. Its
// slices and maps are the mirror's own, shared by every watcher and never
// modified (Catalog.Watch documents them as read-only).
func view(in *switchboard.Instance, expired bool) switchboard.Instance {
	out := *in
	out.Stale = expired
	return out
}

func (e *entry) view() switchboard.Instance { return view(e.inst, e.expired) }

func (e *entry) added() switchboard.Event {
	return switchboard.Event{Kind: switchboard.EventAdded, Instance: e.view(), Revision: e.inst.Revision}
}
