package httpapi

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/switchboard-io/switchboard"
)

// The ownership of the ids of one heartbeat request comes from the
// server's mirror; an id the mirror does not hold (a row registered
// through another server that this one has not seen yet, or no row at
// all) is read from the catalog, and only those ids: with one GetMany
// (WHERE id IN …) on a catalog that has it (switchboard.MultiGetter, both
// SQL backends), else with one Get each for up to ownerGets of them, at
// most ownerGetsParallel at a time. Never with a listing of the whole
// catalog: a request naming 10,000 unknown ids would make every server
// read every row. On a catalog without GetMany, the ids past ownerGets
// are answered missing (their owners register them again, and a
// registration reads its own id) while the mirror is current, and 503
// while it is not.
const (
	ownerGets         = 32
	ownerGetsParallel = 8
)

// owners returns the ownership of each of ids (duplicates allowed): the
// same as owner for each id, in a bounded number of catalog round trips.
func (s *Server) owners(ctx context.Context, ids []string) (map[string]owner, error) {
	out, miss := s.feed.owners(ids)
	if len(miss) == 0 {
		return out, nil
	}
	if mg, ok := s.cat.(switchboard.MultiGetter); ok {
		list, err := mg.GetMany(ctx, miss)
		if errors.Is(err, switchboard.ErrNoCatalog) {
			return out, nil // no catalog, no rows: see catalogOwner
		}
		if err != nil {
			return nil, err
		}
		for i := range list {
			in := &list[i]
			// A missed id is in out already, as the zero owner (not found).
			if o, ok := out[in.ID]; ok && !o.found {
				out[in.ID] = owner{hash: in.Metadata[secretKey], stale: in.Stale, found: true}
			}
		}
		// An id GetMany did not return has no row: out's zero owner says so.
		return out, nil
	}
	if len(miss) > ownerGets {
		if _, healthy, _ := s.feed.health(); !healthy {
			return nil, catalogDown("the server cannot read the catalog now, so it cannot tell whose rows these are: retry later", s.feed.lastError())
		}
		miss = miss[:ownerGets] // the rest stay not found
	}
	return out, s.getOwners(ctx, miss, out)
}

// getOwners reads the ownership of ids (distinct) from the catalog, one Get
// each, ownerGetsParallel at a time, into out. Every Get runs to its end;
// when some fail, the error returned is that of the first failing id in
// the order of ids (not the first to fail in time), and out is left as
// it was.
func (s *Server) getOwners(ctx context.Context, ids []string, out map[string]owner) error {
	got := make([]owner, len(ids))
	errs := make([]error, len(ids))
	var g errgroup.Group
	g.SetLimit(ownerGetsParallel)
	for i, id := range ids {
		g.Go(func() error {
			got[i], errs[i] = s.catalogOwner(ctx, id)
			return nil // kept in errs: which one is returned is decided below
		})
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for i, id := range ids {
		out[id] = got[i]
	}
	return nil
}

// catalogOwner reads the ownership of id's row from the catalog.
func (s *Server) catalogOwner(ctx context.Context, id string) (owner, error) {
	in, err := s.cat.Get(ctx, id)
	if errors.Is(err, switchboard.ErrNotFound) || errors.Is(err, switchboard.ErrNoCatalog) {
		// No catalog holds no row, so nobody owns the id. The request goes
		// on to Register or Heartbeat, which on PostgreSQL create the
		// tables again when they are gone; refusing it here with 503 would
		// keep a catalog restored empty from ever being filled through the
		// server.
		return owner{}, nil
	}
	if err != nil {
		return owner{}, err
	}
	return owner{hash: in.Metadata[secretKey], stale: in.Stale, found: true}, nil
}

// owners returns the ownership the mirror holds for each of ids, under one
// lock, and the distinct ids it holds no row for (their entries in the map
// are the zero owner until the catalog is asked).
func (f *feed) owners(ids []string) (map[string]owner, []string) {
	out := make(map[string]owner, len(ids))
	var miss []string
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, id := range ids {
		if _, seen := out[id]; seen {
			continue
		}
		o, ok := f.ownerLocked(id)
		if !ok {
			miss = append(miss, id)
		}
		out[id] = o
	}
	return out, miss
}

// owner returns the ownership the mirror holds for id; ok is false when it
// holds no row for id.
func (f *feed) owner(id string) (o owner, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ownerLocked(id)
}

// ownerLocked builds id's owner from the mirror's state: its secret hash
// and whether the row has expired (f.mu held). ok is false, and the owner
// the zero one, when the mirror holds no row for id.
func (f *feed) ownerLocked(id string) (o owner, ok bool) {
	st, ok := f.state[id]
	if !ok {
		return owner{}, false
	}
	return owner{hash: f.hashes[id], stale: st.inst.Stale, found: true}, true
}
