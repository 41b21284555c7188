package catalogtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// testWatchFrom: a watch resumed from the position an earlier watch left
// off at gets what changed meanwhile with the true reasons (a
// deregistration is deregistered, not a guess), then synced, then live
// changes; a position of no history of this catalog is ErrPositionGone. A
// catalog that cannot resume watches (not a WatchResumer) is skipped, and
// says so.
func testWatchFrom(t *testing.T, c switchboard.Catalog) {
	wr, ok := c.(switchboard.WatchResumer)
	if !ok {
		t.Skip("this catalog cannot resume watches (not a switchboard.WatchResumer)")
	}
	a := mustRegister(t, c, sample("a"))
	b := mustRegister(t, c, sample("b"))
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	ch, err := c.Watch(wctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	pos := ""
	for ev := range ch {
		if ev.Position != "" {
			pos = ev.Position
		}
		if ev.Kind == switchboard.EventSynced {
			break
		}
	}
	cancel()
	if pos == "" {
		t.Fatal("the first watch's synced carries no position")
	}
	// While nobody watches: a leaves, b changes, d comes and goes, e comes.
	if err := c.Deregister(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	upd := b
	upd.Version = "2.0.0"
	b2 := mustRegister(t, c, upd)
	d := mustRegister(t, c, sample("d"))
	if err := c.Deregister(ctx(t), d.ID); err != nil {
		t.Fatal(err)
	}
	e := mustRegister(t, c, sample("e"))

	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	ch, err = wr.WatchFrom(rctx, switchboard.Query{}, pos)
	if err != nil {
		t.Fatalf("WatchFrom(%q): %v", pos, err)
	}
	got := map[string]switchboard.Event{}
	for ev := range ch {
		if ev.Kind == switchboard.EventSynced {
			if ev.Position == "" {
				t.Fatal("the resumed watch's synced carries no position")
			}
			break
		}
		got[ev.Instance.ID] = ev
	}
	check := func(id string, kind switchboard.EventKind, reason switchboard.Reason) switchboard.Event {
		t.Helper()
		ev, ok := got[id]
		if !ok || ev.Kind != kind || ev.Reason != reason {
			t.Fatalf("resumed watch: %s got %+v, want %s/%s", id, ev, kind, reason)
		}
		return ev
	}
	check(a.ID, switchboard.EventRemoved, switchboard.ReasonDeregistered)
	check(d.ID, switchboard.EventRemoved, switchboard.ReasonDeregistered)
	if ev := check(b.ID, switchboard.EventUpdated, ""); ev.Instance.Version != "2.0.0" || ev.Revision != b2.Revision {
		t.Fatalf("b resumed as %+v, want version 2.0.0 at revision %d", ev.Instance, b2.Revision)
	}
	check(e.ID, switchboard.EventUpdated, "")
	if len(got) != 4 {
		t.Fatalf("resumed watch named %d instances, want the 4 that changed: %v", len(got), got)
	}
	// Live from there.
	f := mustRegister(t, c, sample("f"))
	for ev := range ch {
		if ev.Kind == switchboard.EventAdded && ev.Instance.ID == f.ID {
			break
		}
	}
	for _, bad := range []string{"nonsense", "1@another-history"} {
		if _, err := wr.WatchFrom(rctx, switchboard.Query{}, bad); !errors.Is(err, switchboard.ErrPositionGone) {
			t.Fatalf("WatchFrom(%q): %v, want ErrPositionGone", bad, err)
		}
	}
}
