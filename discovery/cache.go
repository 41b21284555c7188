// Package discovery is the client side of Switchboard: an in-memory cache of
// the catalog, fed by Catalog.Watch (snapshot, then pushed deltas with TTL
// expiry), that answers lookups by name, type or capability without a query
// per call and without locks, and picks instances round-robin or at random.
//
// When the catalog becomes unreachable the cache keeps serving the last known
// set and reports itself stale instead of answering "no such service".
package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// Options tune a Cache.
type Options struct {
	// Query limits what is cached (default: every active instance).
	Query switchboard.Query
	// Logger receives the cache's logs (default slog.Default()).
	Logger *slog.Logger
	// OnEvent, if set, is called from the cache's goroutine for each event,
	// in order, once the cache's lookups reflect it (or a later change
	// that arrived in the same burst): after a removal, lookups no longer
	// offer that instance.
	OnEvent func(switchboard.Event)
}

// Cache is a live, lock-free view of the catalog.
type Cache struct {
	opts   Options
	view   atomic.Pointer[view]
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	subMu  sync.Mutex
	subs   map[int]func()
	nextID int
}

// view is immutable once published.
type view struct {
	all    []switchboard.Instance
	byID   map[string]int
	byName map[string][]switchboard.Instance
	byType map[string][]switchboard.Instance
	byCap  map[string][]switchboard.Instance
	rr     map[string]*atomic.Uint64 // round-robin cursor per capability, carried across views
	stale  bool
	err    error
}

// New starts a cache on cat and returns once it holds the catalog's current
// set. The cache follows the catalog until ctx ends or Close is called.
func New(ctx context.Context, cat switchboard.Catalog, opts Options) (*Cache, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	q := opts.Query
	q.All = false
	wctx, cancel := context.WithCancel(ctx)
	ch, err := cat.Watch(wctx, q)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("discovery: %w", err)
	}
	c := &Cache{opts: opts, cancel: cancel, done: make(chan struct{})}
	c.view.Store(build(nil, nil, false, nil))
	set := map[string]switchboard.Instance{}
	var pending []switchboard.Event
	// Apply the snapshot synchronously: New returns a usable cache.
	for ev := range ch {
		apply(set, ev)
		pending = append(pending, ev)
		if ev.Kind == switchboard.EventSynced {
			c.publish(set, false, nil)
			c.deliver(pending)
			go c.follow(ch, set)
			return c, nil
		}
	}
	cancel()
	return nil, fmt.Errorf("discovery: watch ended before the snapshot: %w", switchboard.ErrClosed)
}

func apply(set map[string]switchboard.Instance, ev switchboard.Event) {
	switch ev.Kind {
	case switchboard.EventAdded, switchboard.EventUpdated:
		set[ev.Instance.ID] = ev.Instance
	case switchboard.EventRemoved:
		delete(set, ev.Instance.ID)
	}
}

func (c *Cache) follow(ch <-chan switchboard.Event, set map[string]switchboard.Instance) {
	defer close(c.done)
	stale, lastErr := false, error(nil)
	var pending []switchboard.Event
	for ev := range ch {
		apply(set, ev)
		pending = append(pending, ev)
		switch ev.Kind {
		case switchboard.EventError:
			if !stale {
				c.opts.Logger.Warn("discovery: catalog unreachable; serving the last known set, marked stale", "err", ev.Err)
			}
			stale, lastErr = true, ev.Err
		case switchboard.EventSynced:
			if stale {
				c.opts.Logger.Info("discovery: catalog reachable again")
			}
			stale, lastErr = false, nil
		}
		// Publish once per burst: a snapshot of 10,000 instances is one
		// rebuild, not 10,000.
		if len(ch) == 0 {
			c.publish(set, stale, lastErr)
			pending = c.deliver(pending)
		}
	}
	c.publish(set, true, switchboard.ErrClosed)
	c.deliver(pending)
}

// deliver hands published events to OnEvent and returns the emptied slice.
func (c *Cache) deliver(events []switchboard.Event) []switchboard.Event {
	if c.opts.OnEvent != nil {
		for _, ev := range events {
			c.opts.OnEvent(ev)
		}
	}
	return events[:0]
}

func (c *Cache) publish(set map[string]switchboard.Instance, stale bool, err error) {
	c.view.Store(build(set, c.view.Load(), stale, err))
	c.subMu.Lock()
	fns := make([]func(), 0, len(c.subs))
	for _, fn := range c.subs {
		fns = append(fns, fn)
	}
	c.subMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Subscribe calls fn, from the cache's goroutine, each time a new view is
// published (after every burst of changes, and when the cache becomes stale
// or fresh again). fn must return quickly: signal, do not work. The
// returned function unsubscribes.
func (c *Cache) Subscribe(fn func()) (cancel func()) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs == nil {
		c.subs = map[int]func(){}
	}
	id := c.nextID
	c.nextID++
	c.subs[id] = fn
	return func() {
		c.subMu.Lock()
		delete(c.subs, id)
		c.subMu.Unlock()
	}
}

func build(set map[string]switchboard.Instance, prev *view, stale bool, err error) *view {
	v := &view{
		all:    make([]switchboard.Instance, 0, len(set)),
		byID:   make(map[string]int, len(set)),
		byName: map[string][]switchboard.Instance{},
		byType: map[string][]switchboard.Instance{},
		byCap:  map[string][]switchboard.Instance{},
		rr:     map[string]*atomic.Uint64{},
		stale:  stale,
		err:    err,
	}
	for _, in := range set {
		v.all = append(v.all, in)
	}
	slices.SortFunc(v.all, func(a, b switchboard.Instance) int {
		if a.Name != b.Name {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	for i, in := range v.all {
		v.byID[in.ID] = i
		v.byName[in.Name] = append(v.byName[in.Name], in)
		v.byType[in.Type] = append(v.byType[in.Type], in)
		for _, cp := range in.Capabilities {
			v.byCap[cp] = append(v.byCap[cp], in)
		}
	}
	for cp := range v.byCap {
		if prev != nil && prev.rr[cp] != nil {
			v.rr[cp] = prev.rr[cp]
		} else {
			v.rr[cp] = new(atomic.Uint64)
		}
	}
	return v
}

// ByCapability returns the active instances having capability cp, ordered by
// name then id. The slice is shared: do not modify it.
func (c *Cache) ByCapability(cp string) []switchboard.Instance { return c.view.Load().byCap[cp] }

// ByName returns the active instances named name (shared; do not modify).
func (c *Cache) ByName(name string) []switchboard.Instance { return c.view.Load().byName[name] }

// ByType returns the active instances of type typ (shared; do not modify).
func (c *Cache) ByType(typ string) []switchboard.Instance { return c.view.Load().byType[typ] }

// All returns every active instance (shared; do not modify).
func (c *Cache) All() []switchboard.Instance { return c.view.Load().all }

// Get returns the active instance with that id.
func (c *Cache) Get(id string) (switchboard.Instance, bool) {
	v := c.view.Load()
	i, ok := v.byID[id]
	if !ok {
		return switchboard.Instance{}, false
	}
	return v.all[i], true
}

// Lookup returns the active instances selected by q (a new slice).
func (c *Cache) Lookup(q switchboard.Query) []switchboard.Instance {
	v := c.view.Load()
	src := v.all
	switch {
	case q.Capability != "":
		src = v.byCap[q.Capability]
	case q.Name != "":
		src = v.byName[q.Name]
	case q.Type != "":
		src = v.byType[q.Type]
	}
	var out []switchboard.Instance
	for i := range src {
		if q.Matches(&src[i]) {
			out = append(out, src[i])
		}
	}
	return out
}

// PickRoundRobin returns the next active instance with capability cp,
// cycling through them; false when there is none.
func (c *Cache) PickRoundRobin(cp string) (switchboard.Instance, bool) {
	v := c.view.Load()
	list := v.byCap[cp]
	if len(list) == 0 {
		return switchboard.Instance{}, false
	}
	n := v.rr[cp].Add(1) - 1
	return list[n%uint64(len(list))], true
}

// PickRandom returns a uniformly random active instance with capability cp.
func (c *Cache) PickRandom(cp string) (switchboard.Instance, bool) {
	list := c.view.Load().byCap[cp]
	if len(list) == 0 {
		return switchboard.Instance{}, false
	}
	return list[rand.IntN(len(list))], true
}

// Stale reports whether the cache is serving a set it could not confirm
// (the catalog is unreachable), and the error that made it so.
func (c *Cache) Stale() (bool, error) {
	v := c.view.Load()
	return v.stale, v.err
}

// Close stops following the catalog. It is idempotent.
func (c *Cache) Close() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}
