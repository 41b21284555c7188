package catalogtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
)

// testHealthEvents walks a checked instance through every status: the
// default watcher sees it added when it passes and removed (check_failed,
// with the check's output) when it turns critical; a watcher of every row
// sees updates instead. Since is stamped by the catalog's clock when the
// status changes; every change is a new revision; the same status and
// output again writes nothing.
func testHealthEvents(t *testing.T, c switchboard.Catalog) {
	h := healthSetter(t, c)
	a := mustRegister(t, c, checked("judged"))
	w := watch(t, c, switchboard.Query{})
	all := watch(t, c, switchboard.Query{All: true})
	if w.count() != 0 {
		t.Fatalf("a default watch shows a row not checked yet:%s", w.dump())
	}
	expect(t, all.next(0), switchboard.EventAdded, "", a.ID)
	rev := a.Revision
	nw, na := 0, 1 // the next event of each watcher
	// set stores h2 and checks what SetHealth returned, every read and
	// the next event of both watchers (wantKind "": the default watcher,
	// which does not see the row, hears nothing); moved says whether
	// Since must move (the status changed).
	set := func(h2 switchboard.Health, wantKind switchboard.EventKind, wantReason switchboard.Reason, moved bool) switchboard.Instance {
		t.Helper()
		prev, err := c.Get(ctx(t), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		before, err := c.Now(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		h2.Since = time.Unix(1e9, 0) // the catalog's clock stamps it, not the caller
		got, err := h.SetHealth(ctx(t), a.ID, h2)
		if err != nil {
			t.Fatalf("SetHealth(%+v): %v", h2, err)
		}
		after, err := c.Now(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got.Health.Status != h2.Status || got.Health.Output != h2.Output {
			t.Fatalf("SetHealth(%s, %q) returned health %+v", h2.Status, h2.Output, got.Health)
		}
		// Before whole milliseconds: a catalog behind the HTTP API carries
		// times to the millisecond (switchboard.TimeFormat).
		if moved && (got.Health.Since.Before(before.Truncate(time.Millisecond)) || got.Health.Since.After(after)) {
			t.Fatalf("SetHealth(%s): since %v, not within the call (%v to %v by the catalog's clock)", h2.Status, got.Health.Since, before, after)
		}
		if !moved && !got.Health.Since.Equal(prev.Health.Since) {
			t.Fatalf("SetHealth(%s, %q) of the same status moved since from %v to %v", h2.Status, h2.Output, prev.Health.Since, got.Health.Since)
		}
		if rev != 0 && got.Revision <= rev {
			t.Fatalf("SetHealth(%s, %q): revision %d, not above %d", h2.Status, h2.Output, got.Revision, rev)
		}
		rev = got.Revision
		everyRead(t, c, a.ID, func(how string, in switchboard.Instance) {
			if !sameHealth(in.Health, got.Health) || in.Revision != got.Revision {
				t.Fatalf("%s: health %+v at revision %d; SetHealth returned %+v at %d", how, in.Health, in.Revision, got.Health, got.Revision)
			}
		})
		if wantKind != "" {
			ev := w.next(nw)
			nw++
			expect(t, ev, wantKind, wantReason, a.ID)
			if !sameHealth(ev.Instance.Health, got.Health) || ev.Revision != got.Revision {
				t.Fatalf("default watcher: %s with health %+v at revision %d; want %+v at %d", ev.Kind, ev.Instance.Health, ev.Revision, got.Health, got.Revision)
			}
		}
		ev := all.next(na)
		na++
		expect(t, ev, switchboard.EventUpdated, "", a.ID)
		if !sameHealth(ev.Instance.Health, got.Health) || ev.Revision != got.Revision {
			t.Fatalf("watcher of every row: health %+v at revision %d; want %+v at %d", ev.Instance.Health, ev.Revision, got.Health, got.Revision)
		}
		return got
	}
	listed := func(want bool) {
		t.Helper()
		got, err := c.List(ctx(t), switchboard.Query{Name: "judged"})
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) == 1) != want || len(got) > 1 {
			t.Fatalf("List of the default query: %v; want the instance listed: %v", ids(got), want)
		}
	}
	listed(false)
	pass := set(switchboard.Health{Status: switchboard.StatusPassing, Output: "HTTP 200"}, switchboard.EventAdded, "", true)
	if !pass.Serving() {
		t.Fatal("a passing instance is not serving")
	}
	listed(true)
	// The same status and output again: nothing written.
	same, err := h.SetHealth(ctx(t), a.ID, switchboard.Health{Status: switchboard.StatusPassing, Output: "HTTP 200"})
	if err != nil {
		t.Fatal(err)
	}
	if same.Revision != pass.Revision || !same.Health.Since.Equal(pass.Health.Since) {
		t.Fatalf("the same health again: revision %d, since %v; want %d, %v", same.Revision, same.Health.Since, pass.Revision, pass.Health.Since)
	}
	// Another output of the same status is a change; Since stays.
	set(switchboard.Health{Status: switchboard.StatusPassing, Output: "HTTP 204"}, switchboard.EventUpdated, "", false)
	warn := set(switchboard.Health{Status: switchboard.StatusWarning, Output: "HTTP 429"}, switchboard.EventUpdated, "", true)
	if !warn.Serving() || warn.Status() != switchboard.StatusWarning {
		t.Fatalf("a warning instance: serving %v, status %s", warn.Serving(), warn.Status())
	}
	listed(true)
	crit := set(switchboard.Health{Status: switchboard.StatusCritical, Output: "dial tcp 127.0.0.1:4317: connection refused"},
		switchboard.EventRemoved, switchboard.ReasonCheckFailed, true)
	if crit.Serving() {
		t.Fatal("a critical instance is serving")
	}
	listed(false)
	if n := watch(t, c, switchboard.Query{Name: "judged"}).count(); n != 0 {
		t.Fatalf("a new default watch's snapshot holds the critical row (%d events)", n)
	}
	// Critical to critical with another output: the default watcher,
	// which does not see the row, hears nothing; the next event it gets
	// is the row's return. Since stays.
	set(switchboard.Health{Status: switchboard.StatusCritical, Output: "i/o timeout"}, "", "", false)
	set(switchboard.Health{Status: switchboard.StatusPassing, Output: "HTTP 200"}, switchboard.EventAdded, "", true)
	listed(true)
	if w.count() != nw {
		t.Fatalf("default watcher: extra events:%s", w.dump())
	}

	for _, id := range []string{"ghost", "a\x00b"} {
		if _, err := h.SetHealth(ctx(t), id, switchboard.Health{Status: switchboard.StatusPassing}); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("SetHealth(%q): %v, want ErrNotFound", id, err)
		}
	}
	if _, err := c.Get(ctx(t), "ghost"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("SetHealth of an unknown id stored a row: %v", err)
	}
}

func testHealthInvalid(t *testing.T, c switchboard.Catalog) {
	h := healthSetter(t, c)
	a := mustRegister(t, c, checked("judged"))
	for _, s := range []switchboard.Status{"", "bogus", switchboard.StatusDraining, "PASSING"} {
		_, err := h.SetHealth(ctx(t), a.ID, switchboard.Health{Status: s, Output: "x"})
		wantField(t, err, "health.status")
		_, err = h.SetHealth(ctx(t), "ghost", switchboard.Health{Status: s})
		if !errors.Is(err, switchboard.ErrInvalid) && !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("SetHealth of an unknown id with status %q: %v", s, err)
		}
	}
	got, err := c.Get(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != a.Revision || !sameHealth(got.Health, a.Health) {
		t.Fatalf("a refused SetHealth changed the row: %+v at %d, was %+v at %d", got.Health, got.Revision, a.Health, a.Revision)
	}
}

// testHealthOutputCut: the output is stored cut to MaxHealthOutput bytes,
// as backend.ValidateHealth cuts it, and valid UTF-8.
func testHealthOutputCut(t *testing.T, c switchboard.Catalog) {
	h := healthSetter(t, c)
	a := mustRegister(t, c, checked("judged"))
	for _, out := range []string{
		strings.Repeat("x", 3*switchboard.MaxHealthOutput),
		strings.Repeat("é", switchboard.MaxHealthOutput),
		"bad \xff utf-8" + strings.Repeat("y", switchboard.MaxHealthOutput),
	} {
		hh := switchboard.Health{Status: switchboard.StatusCritical, Output: out}
		want, err := backend.ValidateHealth(hh)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.SetHealth(ctx(t), a.ID, hh)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Health.Output) > switchboard.MaxHealthOutput || got.Health.Output != want.Output {
			t.Fatalf("output of %d bytes stored as %d bytes %q; want %q", len(out), len(got.Health.Output), got.Health.Output, want.Output)
		}
		if g, err := c.Get(ctx(t), a.ID); err != nil || g.Health.Output != want.Output {
			t.Fatalf("Get: output %q %v; want %q", g.Health.Output, err, want.Output)
		}
	}
}

// testRemoveReason: a Remover deletes a row with the reason watchers see;
// another reason is refused and deletes nothing; an unknown id is not
// found.
func testRemoveReason(t *testing.T, c switchboard.Catalog) {
	rm, ok := c.(switchboard.Remover)
	if !ok {
		t.Skip("the catalog records no removal reason (no switchboard.Remover)")
	}
	a := mustRegister(t, c, sample("removed"))
	w := watch(t, c, switchboard.Query{Name: "removed"})
	expect(t, w.next(0), switchboard.EventAdded, "", a.ID)
	if err := rm.Remove(ctx(t), a.ID, switchboard.ReasonExpired); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("Remove with reason expired: %v, want ErrInvalid", err)
	}
	if _, err := c.Get(ctx(t), a.ID); err != nil {
		t.Fatalf("a refused Remove deleted the row: %v", err)
	}
	if err := rm.Remove(ctx(t), a.ID, switchboard.ReasonCheckCritical); err != nil {
		t.Fatal(err)
	}
	expect(t, w.next(1), switchboard.EventRemoved, switchboard.ReasonCheckCritical, a.ID)
	if err := rm.Remove(ctx(t), a.ID, switchboard.ReasonCheckCritical); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Remove of a row gone: %v, want ErrNotFound", err)
	}
}
