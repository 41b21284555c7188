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
