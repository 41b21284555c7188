package switchboard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// Close drains before it deregisters: a watcher sees the instance updated
// as draining (out of rotation) and only then removed as deregistered.
func TestBootstrapCloseDrainsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := testkit.OpenSQLite(t)
	reg, err := switchboard.Bootstrap(ctx, cat, service("d"), switchboard.BootstrapOptions{DisableReaper: true, DrainWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cat.Watch(ctx, switchboard.Query{Name: "d"})
	if err != nil {
		t.Fatal(err)
	}
	next := func() switchboard.Event {
		t.Helper()
		for {
			select {
			case ev := <-ch:
				if ev.Kind != switchboard.EventSynced {
					return ev
				}
			case <-ctx.Done():
				t.Fatal("no event")
			}
		}
	}
	if ev := next(); ev.Kind != switchboard.EventAdded || ev.Instance.Draining {
		t.Fatalf("first event %+v", ev)
	}
	closed := make(chan error, 1)
	go func() { closed <- reg.Close() }()
	if ev := next(); ev.Kind != switchboard.EventUpdated || !ev.Instance.Draining || ev.Instance.Serving() {
		t.Fatalf("after Close, want updated draining first, got %+v", ev)
	}
	if ev := next(); ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonDeregistered {
		t.Fatalf("then removed deregistered, got %+v", ev)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// Drain and Undrain through a Registration; a negative DrainWait skips the
// drain on Close; a catalog that cannot drain says so.
func TestRegistrationDrain(t *testing.T) {
	ctx := context.Background()
	cat := testkit.OpenSQLite(t)
	reg, err := switchboard.Bootstrap(ctx, cat, service("e"), switchboard.BootstrapOptions{DisableReaper: true, DrainWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Drain(ctx); err != nil || !reg.Instance().Draining {
		t.Fatalf("drain: %v, %+v", err, reg.Instance())
	}
	if got, err := cat.Get(ctx, reg.ID()); err != nil || !got.Draining {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if err := reg.Undrain(ctx); err != nil || reg.Instance().Draining {
		t.Fatalf("undrain: %v, %+v", err, reg.Instance())
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := cat.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("after Close: %+v, %v", got, err)
	}

	plain := struct{ switchboard.Catalog }{testkit.OpenSQLite(t)}
	reg2, err := switchboard.Bootstrap(ctx, plain, service("f"), switchboard.BootstrapOptions{DisableReaper: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reg2.Close()
	if err := reg2.Drain(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("drain on a catalog that cannot: %v", err)
	}
}

// gatedDrainer holds every Drain until gate closes, so that a test can
// call DrainAndWait again while one is under way.
type gatedDrainer struct {
	switchboard.Catalog
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedDrainer) Drain(ctx context.Context, id string, draining bool) (switchboard.Instance, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.Catalog.(switchboard.Drainer).Drain(ctx, id, draining)
}

// Close on the end of Bootstrap's context and a server stopping on the
// same signal both call DrainAndWait: they share one drain and one wait.
// The second neither returns before the drain wait is over (its server
// would stop while callers still arrive) nor drains a row Close deleted.
func TestDrainAndWaitShared(t *testing.T) {
	ctx := context.Background()
	cat := &gatedDrainer{Catalog: testkit.OpenSQLite(t), entered: make(chan struct{}, 2), gate: make(chan struct{})}
	reg, err := switchboard.Bootstrap(ctx, cat, service("g"), switchboard.BootstrapOptions{DisableReaper: true, DrainWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- reg.DrainAndWait() }()
	<-cat.entered // the first is inside Drain
	second := make(chan error, 1)
	go func() { second <- reg.DrainAndWait() }()
	closed := make(chan error, 1)
	go func() { closed <- reg.Close() }()
	select {
	case err := <-second:
		t.Fatalf("second DrainAndWait returned %v while the first was still draining", err)
	case err := <-closed:
		t.Fatalf("Close returned %v while the drain was under way", err)
	case <-cat.entered:
		t.Fatal("a second Drain was sent")
	case <-time.After(50 * time.Millisecond):
	}
	close(cat.gate)
	for name, ch := range map[string]chan error{"first": first, "second": second, "close": closed} {
		if err := <-ch; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got, err := cat.Get(ctx, reg.ID()); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("after Close: %+v, %v", got, err)
	}
}
