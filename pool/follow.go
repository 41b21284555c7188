package pool

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Follow keeps the pool in step with the instances of cat selected by q
// (switchboard.Query{} for all): every instance is added under its module
// name (Instance.Name) with its ID and Address, moved when its address
// changes, and removed when it is deregistered or expires. It works with
// every backend, through Catalog.Watch.
//
// Follow returns once the catalog's current set has been applied (the
// watch's first EventSynced), so a send right after it finds every module
// already registered; it returns an error when the first Watch fails or ctx
// ends first, and ErrClosed when the pool is closed (before or while it
// waits for that sync). The watch goes on in the background until ctx
// ends. While the
// catalog is unreachable (EventError) the last known set is kept; if the
// watch stream ends early it is re-established with backoff and the
// instances that disappeared meanwhile are removed at its next sync.
func (p *Pool) Follow(ctx context.Context, cat switchboard.Catalog, q switchboard.Query) error {
	// Count the follow under p.mu: Close sets closed under the same lock
	// before it waits, so no Add can race its Wait, and a follow is either
	// waited for or refused.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.follows.Add(1)
	p.mu.Unlock()
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.ctx, cancel)
	events, err := cat.Watch(ctx, q)
	if err != nil {
		stop()
		cancel()
		p.follows.Done()
		return err
	}
	f := &follower{p: p, known: map[string]string{}}
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		defer p.follows.Done()
		defer stop()
		defer cancel()
		backoff := 100 * time.Millisecond
		for {
			f.run(ctx, events, func() { once.Do(func() { close(synced) }) })
			if ctx.Err() != nil {
				return
			}
			for {
				p.log.Warn("address pool: catalog watch ended; watching again", "retry_in", backoff)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 10*time.Second)
				if events, err = cat.Watch(ctx, q); err == nil {
					break
				}
				p.log.Warn("address pool: catalog watch failed", "err", err)
			}
		}
	}()
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		if parent.Err() == nil { // the pool closed, not the caller
			return ErrClosed
		}
		return ctx.Err()
	}
}

// FollowEvents applies a stream of catalog events to the pool until the
// channel closes or ctx ends (for callers that already hold a watch).
func (p *Pool) FollowEvents(ctx context.Context, events <-chan switchboard.Event) {
	f := &follower{p: p, known: map[string]string{}}
	f.run(ctx, events, func() {})
}

// follower applies one watch's events and remembers which module each
// instance id was registered under.
type follower struct {
	p     *Pool
	known map[string]string // instance id → module
}

func (f *follower) run(ctx context.Context, events <-chan switchboard.Event, onSync func()) {
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
			in := ev.Instance
			if snapshot {
				seen[in.ID] = true
			}
			if in.Stale {
				f.remove(in.ID)
				continue
			}
			if old, ok := f.known[in.ID]; ok && old != in.Name {
				f.p.RemoveInstance(old, in.ID)
			}
			f.known[in.ID] = in.Name
			f.p.AddInstance(in.Name, in.ID, in.Address)
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
			onSync()
		case switchboard.EventError:
			f.p.log.Warn("address pool: catalog unreachable; keeping the last known addresses", "err", ev.Err)
		}
	}
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
