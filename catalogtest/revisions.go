package catalogtest

import (
	"testing"

	"github.com/switchboard-io/switchboard"
)

// testRevisions: every state a catalog returns carries its revision, which
// grows with each change of the instance and is comparable across
// instances; a heartbeat or an identical re-registration keeps it; Get,
// List and every watch event agree with Register; a removal's revision is
// never below the state it removes. A catalog that does not track
// revisions (every Revision 0) is skipped, and says so.
func testRevisions(t *testing.T, c switchboard.Catalog) {
	w := watch(t, c, switchboard.Query{})
	a := mustRegister(t, c, sample("a"))
	if a.Revision == 0 {
		t.Skip("this catalog does not track revisions (Register returned Revision 0)")
	}
	b := mustRegister(t, c, sample("b"))
	if b.Revision <= a.Revision {
		t.Fatalf("b registered after a has revision %d, a %d: want it higher", b.Revision, a.Revision)
	}
	same := mustRegister(t, c, a) // identical: a heartbeat
	if same.Revision != a.Revision {
		t.Fatalf("an identical re-registration changed the revision from %d to %d", a.Revision, same.Revision)
	}
	if _, err := c.Heartbeat(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	upd := a
	upd.Version = "2.0.0"
	a2 := mustRegister(t, c, upd)
	if a2.Revision <= b.Revision {
		t.Fatalf("the update of a has revision %d, not above b's %d", a2.Revision, b.Revision)
	}
	got, err := c.Get(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != a2.Revision {
		t.Fatalf("Get: revision %d, Register returned %d", got.Revision, a2.Revision)
	}
	list, err := c.List(ctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if want := map[string]int64{a.ID: a2.Revision, b.ID: b.Revision}[in.ID]; in.Revision != want {
			t.Fatalf("List: %s at revision %d, want %d", in.ID, in.Revision, want)
		}
	}
	if err := c.Deregister(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		kind switchboard.EventKind
		id   string
		rev  int64
	}{
		{switchboard.EventAdded, a.ID, a.Revision},
		{switchboard.EventAdded, b.ID, b.Revision},
		{switchboard.EventUpdated, a.ID, a2.Revision},
		{switchboard.EventRemoved, b.ID, b.Revision},
	}
	for i, x := range want {
		ev := w.next(i)
		expect(t, ev, x.kind, ev.Reason, x.id)
		if ev.Kind == switchboard.EventRemoved {
			if ev.Revision < x.rev {
				t.Fatalf("event %d: removal of %s at revision %d, below the state it removes (%d)", i, x.id, ev.Revision, x.rev)
			}
			continue
		}
		if ev.Revision != x.rev || ev.Instance.Revision != x.rev {
			t.Fatalf("event %d (%s %s): revision %d, instance %d; want %d", i, ev.Kind, x.id, ev.Revision, ev.Instance.Revision, x.rev)
		}
	}
}
