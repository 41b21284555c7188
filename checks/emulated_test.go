package checks

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// checkStore stands in, for these tests, for a backend that stores checks
// and their results: this branch's SQLite backend does not store them yet.
// It keeps each row's Check and Health beside the SQLite catalog (shared
// by every handle of one test's file) and attaches them to what Register,
// Get, List and Watch return. It does not make watchers see a status
// change (the hub's part): the runner's own logic does not rely on that.
type checkStore struct {
	mu     sync.Mutex
	checks map[string]switchboard.Check
	health map[string]switchboard.Health
}

func newCheckStore() *checkStore {
	return &checkStore{checks: map[string]switchboard.Check{}, health: map[string]switchboard.Health{}}
}

// stored is a catalog handle with its rows' checks in st.
type stored struct {
	switchboard.Catalog
	st *checkStore
}

func (s *stored) attach(in *switchboard.Instance) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if c, ok := s.st.checks[in.ID]; ok {
		in.Check = &c
		in.Health = s.st.health[in.ID]
	}
}

func (s *stored) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	if in.Type == "" {
		in.Type = "test"
	}
	norm, err := switchboard.Normalize(in)
	if err != nil {
		return switchboard.Instance{}, err
	}
	out, err := s.Catalog.Register(ctx, in)
	if err != nil {
		return out, err
	}
	s.st.mu.Lock()
	if norm.Check != nil {
		if _, had := s.st.checks[out.ID]; !had {
			s.st.health[out.ID] = switchboard.Health{Status: switchboard.StatusCritical, Output: "not checked yet", Since: out.RegisteredAt}
		}
		s.st.checks[out.ID] = *norm.Check
	}
	s.st.mu.Unlock()
	s.attach(&out)
	return out, nil
}

func (s *stored) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	in, err := s.Catalog.Get(ctx, id)
	if err == nil {
		s.attach(&in)
	}
	return in, err
}

func (s *stored) Deregister(ctx context.Context, id string) error {
	err := s.Catalog.Deregister(ctx, id)
	s.st.mu.Lock()
	delete(s.st.checks, id)
	delete(s.st.health, id)
	s.st.mu.Unlock()
	return err
}

func (s *stored) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	in, err := s.Catalog.Watch(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(chan switchboard.Event)
	go func() {
		defer close(out)
		for ev := range in {
			s.attach(&ev.Instance)
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (s *stored) SetHealth(ctx context.Context, id string, h switchboard.Health) (switchboard.Instance, error) {
	in, err := s.Catalog.Get(ctx, id)
	if err != nil {
		return in, err
	}
	h, err = switchboard.ValidateHealth(h)
	if err != nil {
		return switchboard.Instance{}, err
	}
	now, err := s.Catalog.Now(ctx)
	if err != nil {
		return switchboard.Instance{}, err
	}
	s.st.mu.Lock()
	if old := s.st.health[id]; old.Status == h.Status {
		h.Since = old.Since
	} else {
		h.Since = now
	}
	s.st.health[id] = h
	s.st.mu.Unlock()
	s.attach(&in)
	return in, nil
}

var _ switchboard.HealthSetter = (*stored)(nil)

// The leases are the SQLite catalog's own.

func (s *stored) leaser() switchboard.Leaser { return s.Catalog.(switchboard.Leaser) }

func (s *stored) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	return s.leaser().Acquire(ctx, name, holder, ttl)
}

func (s *stored) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	return s.leaser().Renew(ctx, l)
}

func (s *stored) Release(ctx context.Context, l switchboard.Lease) error {
	return s.leaser().Release(ctx, l)
}

func (s *stored) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	return s.leaser().Leases(ctx)
}

// stores are the check stores of the tests' catalog files.
var stores sync.Map // path → *checkStore

// openSQLite opens a handle on the SQLite catalog file path (with the
// stand-in check store of that file), closed at cleanup.
func openSQLite(t *testing.T, path string) switchboard.Catalog {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), "sqlite://"+path, switchboard.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	st, _ := stores.LoadOrStore(path, newCheckStore())
	return &stored{Catalog: cat, st: st.(*checkStore)}
}

// openTemp opens a catalog on a new SQLite file.
func openTemp(t *testing.T) switchboard.Catalog {
	return openSQLite(t, filepath.Join(t.TempDir(), "catalog.db"))
}
