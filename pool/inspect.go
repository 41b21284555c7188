package pool

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc/connectivity"
)

// Modules returns the registered modules and their addresses (sorted), for
// inspection. Instances that are not serving are not registered.
func (p *Pool) Modules() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]string, len(p.modules))
	for m, insts := range p.modules {
		var addrs []string
		for _, t := range insts {
			if !slices.Contains(addrs, t.addr) {
				addrs = append(addrs, t.addr)
			}
		}
		sort.Strings(addrs)
		out[m] = addrs
	}
	return out
}

// States returns the connectivity state of every dialled connection, by
// address (for inspection and health pages).
func (p *Pool) States() map[string]connectivity.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]connectivity.State, len(p.conns))
	for a, c := range p.conns {
		if cc := c.cc.Load(); cc != nil {
			out[a] = cc.GetState()
		}
	}
	return out
}

// Connections returns the addresses that currently have a connection entry
// (dialled or about to be), sorted. Connections still draining after their
// module left are not among them: ConnectionList lists them too.
func (p *Pool) Connections() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.conns))
	for a := range p.conns {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Connection is one connection of the pool, as ConnectionList shows it.
type Connection struct {
	Addr string
	// Draining is set on a connection no module uses any more (its
	// instances left or moved) that stays open for the calls in flight on
	// it, until they end or the drain timeout (Options.DrainTimeout).
	Draining bool
	// Calls is the number of sends in flight on the connection.
	Calls int64
	// Ejected is set while the address is ejected for its transport
	// failures (Options.Ejection), until EjectedUntil; Failures is the
	// count of consecutive transport failures since the last answer or
	// ejection.
	Ejected      bool
	EjectedUntil time.Time
	Failures     int
}

// ConnectionList returns every connection entry, for inspection: those of
// Connections, and the draining ones, marked Draining (an address can have
// both: a module back on it while calls to its old instance drain), sorted
// by address, the live entry first.
func (p *Pool) ConnectionList() []Connection {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Connection, 0, len(p.conns)+len(p.drain))
	for a, c := range p.conns {
		e := Connection{Addr: a, Calls: c.inFlight(), Failures: int(c.fails.Load())}
		if c.isEjected() {
			e.Ejected, e.EjectedUntil = true, time.Unix(0, c.until.Load())
		}
		out = append(out, e)
	}
	for c := range p.drain {
		out = append(out, Connection{Addr: c.addr, Draining: true, Calls: c.inFlight()})
	}
	// The live entries were appended first, and an address has at most
	// one: a stable sort by address keeps it before the draining ones.
	slices.SortStableFunc(out, func(a, b Connection) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}
