// Package discovery is the client side of Switchboard: an in-memory cache of
// the catalog, fed by Catalog.Watch (snapshot, then pushed deltas with TTL
// expiry), that answers lookups by name, type or capability without a query
// per call and without locks, and picks instances round robin, at random,
// by weight (smooth weighted round robin, weighted random) and preferring
// the caller's zone. It is meant to be a process's one view of the
// catalog: the resolver and the address pool can both read the same cache.
//
// Lookups and picks answer only instances that are Serving (not stale, not
// draining, check not critical); Get, All, Len, Snapshot.Instances and the
// changes given to subscribers hold every instance the cache has, draining
// ones included (the catalog's watch already leaves out stale and critical
// ones).
//
// Each published version (see Snapshot) is immutable. A change copies one
// shard of the index by id, and one chunk of members (and the list of
// chunks) of each bucket it touches (its name's, its type's, its
// capabilities'), not the catalog; a burst of changes is published as one
// version. Picks read a capability's or a name's bucket: round robin by a
// counter, random by rand.IntN, when every member serves. The weighted and
// zone-preferring picks (and the unweighted ones while a member does not
// serve) read a table of the serving members by weight and zone, built
// once per version on the first pick that needs it (O(members)); smooth
// weighted round robin then compares one member per distinct weight.
//
// When the catalog becomes unreachable the cache keeps serving the last known
// set and reports itself stale instead of answering "no such service"; a
// cache created while the catalog already knows of an outage is stale from
// the start. When the watch ends before the cache is closed, the cache
// watches again with backoff, stale meanwhile, and at the new watch's
// synced drops what the catalog no longer has.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Options tune a Cache.
type Options struct {
	// Query limits what is cached (default: every active instance). Its
	// All is ignored: the cache holds active instances only, and drops an
	// instance when it expires.
	Query switchboard.Query
	// Logger receives the cache's logs (default slog.Default()).
	Logger *slog.Logger
	// OnEvent, if set, is called from the cache's goroutine for each event,
	// in order, once the cache's lookups reflect it (or a later change
	// that arrived in the same burst): after a removal, lookups no longer
	// offer that instance. An instance that a new watch (after one that
	// ended) no longer has comes as a removal with ReasonUnknown.
	OnEvent func(switchboard.Event)
}

// maxBurst bounds how many events are applied before a version is
// published, so a long burst does not hold back lookups of its first
// changes.
const maxBurst = 1024

// Cache is a live, lock-free view of the catalog.
type Cache struct {
	opts    Options
	cat     switchboard.Catalog
	snap    atomic.Pointer[Snapshot]
	w       *writer
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
	pending []switchboard.Event // for OnEvent, until published

	subMu  sync.Mutex // orders publishing and subscribing
	subs   map[int]func(*Snapshot, []Change)
	nextID int

	// presumed: stale on the catalog's stats alone (startStale), until the
	// watch's first event after the snapshot confirms it (error) or not.
	presumed bool
}

// New starts a cache on cat and returns once it holds the catalog's current
// set. The cache follows the catalog until ctx ends or Close is called.
// When cat is a switchboard.WatchStatser that reports itself unhealthy as
// that set arrives (its watch serves the last set it could read), the
// cache is stale from the start, with the catalog's LastError, until the
// watch says the catalog is read again (synced).
func New(ctx context.Context, cat switchboard.Catalog, opts Options) (*Cache, error) {
	if cat == nil {
		return nil, fmt.Errorf("discovery: %w: nil Catalog", switchboard.ErrInvalid)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Query.All = false
	wctx, cancel := context.WithCancel(ctx)
	ch, err := cat.Watch(wctx, opts.Query)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("discovery: %w", err)
	}
	c := &Cache{opts: opts, cat: cat, cancel: cancel, done: make(chan struct{}), w: newWriter()}
	c.snap.Store(c.w.snapshot())
	// Apply the snapshot synchronously: New returns a usable cache.
	for ev, ok := next(wctx, ch); ok; ev, ok = next(wctx, ch) {
		c.apply(&ev)
		if ev.Kind == switchboard.EventSynced {
			c.startStale()
			c.publish()
			go c.run(wctx, ch)
			return c, nil
		}
	}
	cancel()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("discovery: watch ended before the snapshot: %w", err)
	}
	return nil, fmt.Errorf("discovery: watch ended before the snapshot: %w", switchboard.ErrClosed)
}

// next returns the watch's next event; false when it ended or ctx did (a
// catalog's watch ends with its context, but the cache does not wait for
// it to).
func next(ctx context.Context, ch <-chan switchboard.Event) (switchboard.Event, bool) {
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-ctx.Done():
		return switchboard.Event{}, false
	}
}

// errUnreachable is the stale error of a cache whose catalog reports an
// outage without saying what failed.
var errUnreachable = errors.New("discovery: the catalog reports it cannot be read")

// startStale marks the cache stale from the start when the catalog (a
// switchboard.WatchStatser) already knows of an outage as the snapshot
// ends. Its watch says so too, but only in the error event that follows
// synced, which the cache applies after New has returned: until then the
// cache would claim a set it cannot confirm. The watch was open before
// the stats were read, so it reports every later change of health: the
// error that follows, and synced once the catalog is read again.
//
// The stats only presume the outage: a watch that serves a snapshot during
// one says error right after it (the hub and the server both do), so if the
// watch's first event after the snapshot is anything else, the stats were
// out of date or could not be read themselves (a remote handle's stats are
// a request of their own, which can fail while its stream is fine), and
// the cache is fresh again.
func (c *Cache) startStale() {
	ws, ok := c.cat.(switchboard.WatchStatser)
	if !ok {
		return
	}
	st := ws.WatchStats()
	if st.Healthy {
		return
	}
	err := st.LastError
	if err == nil {
		err = errUnreachable
	}
	c.w.stale, c.w.err, c.presumed = true, err, true
	c.opts.Logger.Warn("discovery: catalog unreachable; serving the last known set, marked stale", "err", err)
}

// apply applies one event to the working version and keeps it for OnEvent.
func (c *Cache) apply(ev *switchboard.Event) {
	c.w.apply(ev)
	if c.opts.OnEvent != nil {
		c.pending = append(c.pending, c.w.removed...) // a resync's, before its synced
		c.pending = append(c.pending, *ev)
	}
	clear(c.w.removed)
	c.w.removed = c.w.removed[:0]
}

// run follows the watch, and watches again each time it ends before ctx.
func (c *Cache) run(ctx context.Context, ch <-chan switchboard.Event) {
	defer close(c.done)
	for ch != nil {
		c.follow(ctx, ch)
		ch = c.rewatch(ctx)
	}
	c.w.stale, c.w.err = true, switchboard.ErrClosed
	c.publish()
}

// follow applies one watch's events until it ends.
func (c *Cache) follow(ctx context.Context, ch <-chan switchboard.Event) {
	for ev, ok := next(ctx, ch); ok; ev, ok = next(ctx, ch) {
		if c.presumed {
			c.presumed = false
			if ev.Kind != switchboard.EventError {
				c.w.stale, c.w.err = false, nil
			}
		}
		wasStale := c.w.stale
		c.apply(&ev)
		switch {
		case ev.Kind == switchboard.EventError && !wasStale:
			c.opts.Logger.Warn("discovery: catalog unreachable; serving the last known set, marked stale", "err", ev.Err)
		case ev.Kind == switchboard.EventSynced && wasStale:
			c.opts.Logger.Info("discovery: catalog reachable again")
		}
		if len(ch) == 0 || c.w.pending >= maxBurst {
			c.publish()
		}
	}
}

// rewatch opens a new watch after one that ended before ctx, retrying with
// backoff while it fails; the cache is stale until the new watch's synced.
// It returns nil when ctx ends or the catalog is closed.
func (c *Cache) rewatch(ctx context.Context) <-chan switchboard.Event {
	if ctx.Err() != nil {
		return nil
	}
	c.w.stale, c.w.err = true, switchboard.ErrClosed
	c.publish()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		if ctx.Err() != nil {
			return nil
		}
		c.opts.Logger.Warn("discovery: catalog watch ended; serving the last known set, marked stale; watching again", "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		ch, err := c.cat.Watch(ctx, c.opts.Query)
		if err == nil {
			c.w.startResync()
			return ch
		}
		if errors.Is(err, switchboard.ErrClosed) {
			return nil
		}
		c.w.err = err
		c.publish()
	}
}

// publish makes the working version the one lookups read, then tells the
// subscribers what changed and hands the events to OnEvent.
func (c *Cache) publish() {
	s := c.w.snapshot()
	c.subMu.Lock()
	c.snap.Store(s)
	fns := make([]func(*Snapshot, []Change), 0, len(c.subs))
	for _, fn := range c.subs {
		fns = append(fns, fn)
	}
	c.subMu.Unlock()
	for _, fn := range fns {
		fn(s, c.w.changes)
	}
	clear(c.w.changes)
	c.w.changes = c.w.changes[:0]
	for _, ev := range c.pending {
		c.opts.OnEvent(ev)
	}
	clear(c.pending)
	c.pending = c.pending[:0]
}

// Subscribe calls fn, from the cache's goroutine, each time a new view is
// published (after every burst of changes, and when the cache becomes stale
// or fresh again). fn must return quickly: signal, do not work. The
// returned function unsubscribes.
func (c *Cache) Subscribe(fn func()) (cancel func()) {
	_, cancel = c.SubscribeChanges(func(*Snapshot, []Change) { fn() })
	return cancel
}

// SubscribeChanges calls fn, from the cache's goroutine, with each new
// version as it is published and the changes that lead to it from the
// previous one (in order; an instance may appear more than once). It
// returns the current version: the first call of fn carries exactly the
// changes made after it, so the snapshot plus the calls are the whole
// history, with nothing missed or counted twice. changes is reused after
// fn returns, and fn must return quickly: copy what it needs, signal,
// do not work. The returned function unsubscribes.
func (c *Cache) SubscribeChanges(fn func(s *Snapshot, changes []Change)) (current *Snapshot, cancel func()) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs == nil {
		c.subs = map[int]func(*Snapshot, []Change){}
	}
	id := c.nextID
	c.nextID++
	c.subs[id] = fn
	return c.snap.Load(), func() {
		c.subMu.Lock()
		delete(c.subs, id)
		c.subMu.Unlock()
	}
}

// Snapshot returns the current version: consistent across all its lookups,
// however the cache changes meanwhile.
func (c *Cache) Snapshot() *Snapshot { return c.snap.Load() }

// ByCapability returns the serving instances having capability cp, ordered by
// name then id. The slice is shared: do not modify it. See
// Snapshot.ByCapability for its cost after a change; PickRoundRobin,
// PickRandom, Count and Snapshot.Instances never build it.
func (c *Cache) ByCapability(cp string) []switchboard.Instance { return c.snap.Load().ByCapability(cp) }

// ByName returns the serving instances named name (shared; do not modify).
func (c *Cache) ByName(name string) []switchboard.Instance { return c.snap.Load().ByName(name) }

// ByType returns the serving instances of type typ (shared; do not modify).
func (c *Cache) ByType(typ string) []switchboard.Instance { return c.snap.Load().ByType(typ) }

// All returns every instance the cache holds, serving or not (shared; do
// not modify).
func (c *Cache) All() []switchboard.Instance { return c.snap.Load().All() }

// Count returns how many serving instances q selects (a lookup, when q has
// one field).
func (c *Cache) Count(q switchboard.Query) int { return c.snap.Load().Count(q) }

// Get returns the instance with that id, serving or not.
func (c *Cache) Get(id string) (switchboard.Instance, bool) { return c.snap.Load().Get(id) }

// Lookup returns the serving instances selected by q (a new slice).
func (c *Cache) Lookup(q switchboard.Query) []switchboard.Instance { return c.snap.Load().Lookup(q) }

// PickRoundRobin returns the next serving instance with capability cp,
// cycling through them; false when there is none. It allocates nothing.
// NewPicker gives the weighted and zone-preferring picks.
func (c *Cache) PickRoundRobin(cp string) (switchboard.Instance, bool) {
	return c.snap.Load().PickRoundRobin(cp)
}

// PickRandom returns a uniformly random serving instance with capability
// cp, allocating nothing.
func (c *Cache) PickRandom(cp string) (switchboard.Instance, bool) {
	return c.snap.Load().PickRandom(cp)
}

// Stale reports whether the cache is serving a set it could not confirm
// (the catalog is unreachable), and the error that made it so.
func (c *Cache) Stale() (bool, error) { return c.snap.Load().Stale() }

// Close stops following the catalog and returns once the cache's goroutine
// has ended. It is idempotent. It must not be called from an OnEvent or
// Subscribe callback, which runs on that goroutine (it would wait for
// itself); end the context given to New there instead.
func (c *Cache) Close() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}
