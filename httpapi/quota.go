package httpapi

import (
	"fmt"
	"net/http"
	"sync"
)

// streamQuota counts the open watch streams, in all, by client
// (clientKey) and by credential (credential.go), against
// Options.MaxWatchers, MaxWatchersPerClient and MaxWatchersPerToken (0:
// none).
type streamQuota struct {
	max, perClient, perToken int
	mu                       sync.Mutex
	total                    int
	by                       map[string]int
	byCred                   map[string]int
}

// take counts one more stream of r's client and credential c, or says
// which quota it would exceed; release gives it back.
func (q *streamQuota) take(r *http.Request, c credential) (release func(), err error) {
	k := clientKey(r)
	counted := q.perToken > 0 && !c.exempt()
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.total >= q.max:
		return nil, tooMany("max_watchers", int64(q.max),
			fmt.Sprintf("this server has %d watch streams open, its limit (http.max_watchers): retry later, or watch through another server", q.total))
	case counted && q.byCred[c.tag] >= q.perToken:
		return nil, tooMany("max_watchers_per_token", int64(q.perToken),
			fmt.Sprintf("%s has %d watch streams open on this server, the limit of one credential (http.max_watchers_per_token): close one (one stream with filters serves many views)", c.what, q.byCred[c.tag]))
	case q.by[k] >= q.perClient:
		return nil, tooMany("max_watchers_per_client", int64(q.perClient),
			fmt.Sprintf("this client has %d watch streams open, the limit of one client (its address and role): close one (one stream with filters serves many views)", q.by[k]))
	}
	q.total++
	q.by[k]++
	if counted {
		q.byCred[c.tag]++
	}
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.total--
		if q.by[k]--; q.by[k] == 0 {
			delete(q.by, k)
		}
		if counted {
			if q.byCred[c.tag]--; q.byCred[c.tag] == 0 {
				delete(q.byCred, c.tag)
			}
		}
	}, nil
}

// instanceQuota refuses a registration that would add a row when the
// server's mirror already holds MaxInstances, and any registration of
// body bytes when its instances already hold MaxInstanceBytes.
func (s *Server) instanceQuota(newRow bool, body int) error {
	n, b := s.feed.size()
	if newRow && n >= s.opts.MaxInstances {
		return tooMany("max_instances", int64(s.opts.MaxInstances),
			fmt.Sprintf("the catalog holds %d instances, this server's limit (http.max_instances): register again once rows expire or are reaped", n))
	}
	if b+int64(body) > s.opts.MaxInstanceBytes {
		return tooMany("max_instances_mib", s.opts.MaxInstanceBytes>>20,
			fmt.Sprintf("the catalog's instances hold %d MiB, this server's limit is %d MiB (http.max_instances_mib): register again once rows expire or are reaped, or register smaller documents",
				b>>20, s.opts.MaxInstanceBytes>>20))
	}
	return nil
}

// inflight counts, by credential tag, the registrations or acquisitions
// that passed their per-credential quota and are not done yet: what the
// count read from the mirror or the catalog may not show yet. Several
// requests of one credential at once are then never let past its quota
// together on one server; while one is both done and counted, another
// may see it twice and be refused (retrying after Retry-After succeeds).
// The requests of one credential are checked one at a time, those of
// different credentials at once.
type inflight struct {
	mu sync.Mutex
	by map[string]*slot
}

// slot is one credential's requests in flight.
type slot struct {
	mu   sync.Mutex // held while one request counts and reserves
	n    int        // reserved, not released
	refs int        // requests holding the slot (it goes at 0)
}

// reserve takes one for tag when the count n (read by count) plus those
// in flight stays under limit, and returns n with release; else it
// returns n and no release.
func (f *inflight) reserve(tag string, limit int, count func() (int, error)) (n int, release func(), err error) {
	f.mu.Lock()
	if f.by == nil {
		f.by = map[string]*slot{}
	}
	sl := f.by[tag]
	if sl == nil {
		sl = &slot{}
		f.by[tag] = sl
	}
	sl.refs++
	f.mu.Unlock()
	drop := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if sl.refs--; sl.refs == 0 {
			delete(f.by, tag)
		}
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	n, err = count()
	if err != nil {
		drop()
		return 0, nil, err
	}
	if n += sl.n; n >= limit {
		drop()
		return n, nil, nil
	}
	sl.n++
	return n, func() {
		sl.mu.Lock()
		sl.n--
		sl.mu.Unlock()
		drop()
	}, nil
}

func noRelease() {}

// credentialInstanceQuota refuses a registration that would make c own
// one more live instance than MaxInstancesPerToken; adds says whether it
// would (the id is new, expired, or another credential's). The release
// returned is called once the registration is done and the mirror shows
// it (or it failed).
func (s *Server) credentialInstanceQuota(c credential, adds bool) (release func(), err error) {
	limit := s.opts.MaxInstancesPerToken
	if limit == 0 || c.exempt() || !adds {
		return noRelease, nil
	}
	n, release, err := s.regs.reserve(c.tag, limit, func() (int, error) { return s.feed.ownedBy(c.tag), nil })
	if err != nil || release != nil {
		return release, err
	}
	return nil, tooMany("max_instances_per_token", int64(limit),
		fmt.Sprintf("%s owns %d live instances, the limit of one credential (http.max_instances_per_token): deregister one, or register again once one expires", c.what, n))
}

// credentialLeaseQuota refuses to let c take one more lease when it holds
// MaxLeasesPerToken (held: not released, not expired), as held counts
// them. The release returned is called once the acquisition is done.
func (s *Server) credentialLeaseQuota(c credential, held func() (int, error)) (release func(), err error) {
	limit := s.opts.MaxLeasesPerToken
	if limit == 0 || c.exempt() {
		return noRelease, nil
	}
	n, release, err := s.takes.reserve(c.tag, limit, held)
	if err != nil || release != nil {
		return release, err
	}
	return nil, tooMany("max_leases_per_token", int64(limit),
		fmt.Sprintf("%s holds %d leases, the limit of one credential (http.max_leases_per_token): release one, or acquire again once one expires", c.what, n))
}
