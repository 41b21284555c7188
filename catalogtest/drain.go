package catalogtest

import (
	"errors"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// testDrain: Drain keeps the instance listed and watched; each change is
// one update at a new revision, and draining to the state it has writes
// nothing.
func testDrain(t *testing.T, c switchboard.Catalog) {
	d := drainer(t, c)
	a := mustRegister(t, c, sample("drained"))
	w := watch(t, c, switchboard.Query{})
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	on, err := d.Drain(ctx(t), a.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if !on.Draining || on.Serving() || on.Status() != switchboard.StatusDraining || on.Stale {
		t.Fatalf("Drain(true) returned draining %v, serving %v, status %s", on.Draining, on.Serving(), on.Status())
	}
	if on.Version != a.Version || !on.RegisteredAt.Equal(a.RegisteredAt) || on.Weight != a.Weight {
		t.Fatalf("Drain changed more than draining: %+v, was %+v", on, a)
	}
	if a.Revision != 0 && on.Revision <= a.Revision {
		t.Fatalf("Drain(true): revision %d, not above %d", on.Revision, a.Revision)
	}
	ev := w.next(1)
	expect(t, ev, switchboard.EventUpdated, "", a.ID)
	if !ev.Instance.Draining || ev.Revision != on.Revision || ev.Instance.Revision != on.Revision {
		t.Fatalf("the drain's event: draining %v at revision %d (instance %d); want draining at %d",
			ev.Instance.Draining, ev.Revision, ev.Instance.Revision, on.Revision)
	}
	list, err := c.List(ctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !list[0].Draining {
		t.Fatalf("List of the default query: %+v; want the draining instance", list)
	}
	everyRead(t, c, a.ID, func(how string, in switchboard.Instance) {
		if !in.Draining || in.Revision != on.Revision {
			t.Fatalf("%s: draining %v at revision %d; want draining at %d", how, in.Draining, in.Revision, on.Revision)
		}
	})

	// The same state again writes nothing: the next event is the undrain.
	again, err := d.Drain(ctx(t), a.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Draining || again.Revision != on.Revision {
		t.Fatalf("a second Drain(true): draining %v at revision %d; want it unchanged at %d", again.Draining, again.Revision, on.Revision)
	}
	off, err := d.Drain(ctx(t), a.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if off.Draining || !off.Serving() || (on.Revision != 0 && off.Revision <= on.Revision) {
		t.Fatalf("Drain(false): draining %v, serving %v at revision %d (drained at %d)", off.Draining, off.Serving(), off.Revision, on.Revision)
	}
	ev = w.next(2)
	expect(t, ev, switchboard.EventUpdated, "", a.ID)
	if ev.Instance.Draining || ev.Revision != off.Revision {
		t.Fatalf("the undrain's event: draining %v at revision %d; want not draining at %d", ev.Instance.Draining, ev.Revision, off.Revision)
	}
	if again, err = d.Drain(ctx(t), a.ID, false); err != nil || again.Draining || again.Revision != off.Revision {
		t.Fatalf("a second Drain(false): %+v %v; want it unchanged at revision %d", again, err, off.Revision)
	}
	// ...and the next event is this update's.
	upd := off
	upd.Version = "2.0.0"
	mustRegister(t, c, upd)
	ev = w.next(3)
	expect(t, ev, switchboard.EventUpdated, "", a.ID)
	if ev.Instance.Version != "2.0.0" || w.count() != 4 {
		t.Fatalf("after the no-op drain, events:%s", w.dump())
	}

	for _, id := range []string{"ghost", "a\x00b", ""} {
		if _, err := d.Drain(ctx(t), id, true); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("Drain(%q): %v, want ErrNotFound", id, err)
		}
	}
	if _, err := c.Get(ctx(t), "ghost"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Drain of an unknown id stored a row: %v", err)
	}
}

// testDrainingCritical: the two states are independent: a draining
// instance that turns critical leaves the default view, and comes back
// draining; undraining a critical one tells the default watcher nothing.
func testDrainingCritical(t *testing.T, c switchboard.Catalog) {
	d := drainer(t, c)
	h := healthSetter(t, c)
	a := mustRegister(t, c, checked("both"))
	w := watch(t, c, switchboard.Query{})
	if _, err := h.SetHealth(ctx(t), a.ID, switchboard.Health{Status: switchboard.StatusPassing}); err != nil {
		t.Fatal(err)
	}
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	if _, err := d.Drain(ctx(t), a.ID, true); err != nil {
		t.Fatal(err)
	}
	expect(t, w.next(1), switchboard.EventUpdated, "", a.ID)
	if _, err := h.SetHealth(ctx(t), a.ID, switchboard.Health{Status: switchboard.StatusCritical, Output: "down"}); err != nil {
		t.Fatal(err)
	}
	ev := w.next(2)
	expect(t, ev, switchboard.EventRemoved, switchboard.ReasonCheckFailed, a.ID)
	if !ev.Instance.Draining || ev.Instance.Status() != switchboard.StatusDraining {
		t.Fatalf("the removal: draining %v, status %s", ev.Instance.Draining, ev.Instance.Status())
	}
	off, err := d.Drain(ctx(t), a.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if off.Health.Status != switchboard.StatusCritical || off.Serving() {
		t.Fatalf("undrained: health %+v, serving %v", off.Health, off.Serving())
	}
	if _, err := h.SetHealth(ctx(t), a.ID, switchboard.Health{Status: switchboard.StatusPassing}); err != nil {
		t.Fatal(err)
	}
	ev = w.next(3)
	expect(t, ev, switchboard.EventAdded, "", a.ID)
	if ev.Instance.Draining || !ev.Instance.Serving() {
		t.Fatalf("back: draining %v, serving %v", ev.Instance.Draining, ev.Instance.Serving())
	}
	if w.count() != 4 {
		t.Fatalf("extra events:%s", w.dump())
	}
}
