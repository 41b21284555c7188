package pool

import (
	"context"
	"sync"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// Follow keeps the pool in step with the instances of cat selected by q
// (switchboard.Query{} for all): every serving instance is added under its
// module name (Instance.Name) with its ID, Address and weight, moved or
// re-weighted when they change, and removed when it is deregistered,
// expires, is drained or its check turns critical (and added again when it
// serves again). It works with
// every backend: it starts a discovery cache on cat for q, closed with the
// follow, and follows it as FollowCache does. A process that already has a
// cache of the catalog should call FollowCache instead and keep one view.
//
// Follow returns once the catalog's current set has been applied (the
// watch's first EventSynced), so a send right after it finds every module
// already registered; it returns an error when the first Watch fails or ctx
// ends first, and ErrClosed when the pool is closed (before or while it
// waits for that sync). The cache goes on in the background until ctx ends
// or the pool closes; what it does while the catalog is unreachable, or
// when its watch ends early, is the cache's: it keeps the last known set,
// and watches again.
func (p *Pool) Follow(ctx context.Context, cat switchboard.Catalog, q switchboard.Query) error {
	ctx, done, err := p.startFollow(ctx)
	if err != nil {
		return err
	}
	c, err := discovery.New(ctx, cat, discovery.Options{Query: q, Logger: p.log})
	if err != nil {
		closed := p.ctx.Err() != nil
		done()
		if closed {
			return ErrClosed
		}
		return err
	}
	p.followCache(ctx, c, q, func() { c.Close(); done() })
	return nil
}

// FollowCache keeps the pool in step with the instances of c selected by q,
// as Follow does with a catalog, sharing the process's one view of it (the
// cache that a resolver, say, also reads). It returns once the cache's
// current set has been applied, and follows the cache's changes in the
// background until ctx ends or the pool closes; it returns ErrClosed on a
// closed pool. An instance that is not serving (Stale, Draining, critical)
// counts as gone.
func (p *Pool) FollowCache(ctx context.Context, c *discovery.Cache, q switchboard.Query) error {
	ctx, done, err := p.startFollow(ctx)
	if err != nil {
		return err
	}
	p.followCache(ctx, c, q, done)
	return nil
}

// startFollow counts a follow under p.mu: Close sets closed under the same
// lock before it waits, so no Add can race its Wait, and a follow is
// either waited for or refused. The context returned ends with ctx or the
// pool; done releases it and the count.
func (p *Pool) startFollow(ctx context.Context) (context.Context, func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, ErrClosed
	}
	p.follows.Add(1)
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.ctx, cancel)
	return ctx, func() { stop(); cancel(); p.follows.Done() }, nil
}

// followCache applies the current set of c, then, on a goroutine of its
// own, each change the cache publishes, until ctx ends; then it calls done.
// The cache's goroutine only queues the changes: dialling is not its work.
func (p *Pool) followCache(ctx context.Context, c *discovery.Cache, q switchboard.Query, done func()) {
	f := &follower{p: p, known: map[string]string{}}
	var mu sync.Mutex
	var queue []discovery.Change
	wake := make(chan struct{}, 1)
	s, unsubscribe := c.SubscribeChanges(func(_ *discovery.Snapshot, changes []discovery.Change) {
		mu.Lock()
		queue = append(queue, changes...)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	for in := range s.Instances(q) {
		f.put(&in)
	}
	go func() {
		defer done()
		defer unsubscribe()
		var batch []discovery.Change
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			mu.Lock()
			batch, queue = queue, batch[:0]
			mu.Unlock()
			for _, ch := range batch {
				if ch.New != nil && q.Matches(ch.New) {
					f.put(ch.New)
				} else if ch.Old != nil {
					f.remove(ch.Old.ID)
				}
			}
			clear(batch)
		}
	}()
}

// FollowEvents applies a stream of catalog events to the pool until the
// channel closes or ctx ends (for callers that already hold a watch).
func (p *Pool) FollowEvents(ctx context.Context, events <-chan switchboard.Event) {
	f := &follower{p: p, known: map[string]string{}}
	f.run(ctx, events)
}

// follower applies one watch's events and remembers which module each
// instance id was registered under.
type follower struct {
	p     *Pool
	known map[string]string // instance id → module
}

func (f *follower) run(ctx context.Context, events <-chan switchboard.Event) {
	seen := map[string]bool{} // ids of the snapshot being received
	snapshot := true
	for {
		var ev switchboard.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-events:
			if !ok {
				return
			}
		}
		switch ev.Kind {
		case switchboard.EventAdded, switchboard.EventUpdated:
			if snapshot {
				seen[ev.Instance.ID] = true
			}
			f.put(&ev.Instance)
		case switchboard.EventRemoved:
			f.remove(ev.Instance.ID)
		case switchboard.EventSynced:
			if snapshot {
				// A re-established watch: drop what vanished meanwhile.
				for id := range f.known {
					if !seen[id] {
						f.remove(id)
					}
				}
				snapshot = false
				seen = nil
			}
		case switchboard.EventError:
			f.p.log.Warn("address pool: catalog unreachable; keeping the last known addresses", "err", ev.Err)
		}
	}
}

// put adds, moves or re-weights an instance; one that is not serving
// (stale, draining, or critical) counts as gone: it gets no new sends, and
// the calls already on it finish.
func (f *follower) put(in *switchboard.Instance) {
	if !in.Serving() {
		f.remove(in.ID)
		return
	}
	if old, ok := f.known[in.ID]; ok && old != in.Name {
		f.p.RemoveInstance(old, in.ID)
	}
	f.known[in.ID] = in.Name
	f.p.AddWeightedInstance(in.Name, in.ID, in.Address, in.TrafficWeight(), in.Zone)
}

func (f *follower) remove(id string) {
	module, ok := f.known[id]
	if !ok {
		return
	}
	delete(f.known, id)
	f.p.RemoveInstance(module, id)
}

// ModuleType is the instance type of a module: an instance registered with
// Type "module" serves the module wire at its Address — host:port for gRPC
// (what `switchboard echo` and `switchboard register --type module
// --address host:port` advertise), nats://tinymodule.<module>.msg for NATS
// (never dialled by this pool). Instances of any other type are services
// that do not speak module.ModuleService.
const ModuleType = "module"

// Connect is the one-call setup of a sending process: a pool tied to ctx
// and following the instances of cat that serve the module wire (Type
// ModuleType); other services in the catalog are neither registered nor
// dialled. It returns once the catalog's current set is registered.
func Connect(ctx context.Context, cat switchboard.Catalog, opts Options) (*Pool, error) {
	p := New(opts)
	p.Start(ctx)
	if err := p.Follow(ctx, cat, switchboard.Query{Type: ModuleType}); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}
