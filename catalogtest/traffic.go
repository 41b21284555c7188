package catalogtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Traffic checks the traffic state of a catalog, each case on a fresh
// catalog: weight and zone round-trip through Register, Get, List and
// Watch; Register never sets Draining or Health; a registration with a
// check stores it; and, on a catalog that implements them,
// switchboard.Drainer, switchboard.HealthSetter and switchboard.Remover
// (the cases of an interface the catalog lacks are skipped, and say so).
func Traffic(t *testing.T, open Open) { traffic(t, open, false) }

// TrafficWithoutChecks is Traffic for a catalog that stores no checks
// (kube://, where the kubelet's probes judge the pods): it must be no
// switchboard.HealthSetter, and must refuse a registration with a check,
// new or over a stored row, with ErrInvalid naming the field "check" and
// nothing written (the case ChecksRefused, in place of
// CheckStartsCritical); RegisterKeepsDrainAndHealth registers without a
// check, and the cases of check results are skipped as on any catalog that
// is no HealthSetter.
func TrafficWithoutChecks(t *testing.T, open Open) { traffic(t, open, true) }

func traffic(t *testing.T, open Open, noChecks bool) {
	checks := testCase{"CheckStartsCritical", testCheckStartsCritical}
	if noChecks {
		checks = testCase{"ChecksRefused", testChecksRefused}
	}
	runCases(t, open, []testCase{
		{"WeightAndZone", testWeightZone},
		{"InvalidTrafficWritesNothing", testInvalidTraffic},
		{"RegisterSetsNoTrafficState", testRegisterSetsNoState},
		checks,
		{"RegisterKeepsDrainAndHealth", func(t *testing.T, c switchboard.Catalog) { testRegisterKeepsState(t, c, !noChecks) }},
		{"Drain", testDrain},
		{"HealthEvents", testHealthEvents},
		{"HealthInvalid", testHealthInvalid},
		{"HealthOutputCut", testHealthOutputCut},
		{"DrainingAndCritical", testDrainingCritical},
		{"RemoveReason", testRemoveReason},
	})
}

func drainer(t *testing.T, c switchboard.Catalog) switchboard.Drainer {
	t.Helper()
	d, ok := c.(switchboard.Drainer)
	if !ok {
		t.Skip("the catalog cannot drain instances (no switchboard.Drainer)")
	}
	return d
}

func healthSetter(t *testing.T, c switchboard.Catalog) switchboard.HealthSetter {
	t.Helper()
	h, ok := c.(switchboard.HealthSetter)
	if !ok {
		t.Skip("the catalog stores no check results (no switchboard.HealthSetter)")
	}
	return h
}

// checked is an instance with an HTTP check.
func checked(name string) switchboard.Instance {
	in := sample(name)
	in.Check = &switchboard.Check{Target: "http://127.0.0.1:4317/health", Interval: 10 * time.Second}
	return in
}

func sameHealth(a, b switchboard.Health) bool {
	return a.Status == b.Status && a.Output == b.Output && a.Since.Equal(b.Since)
}

func noHealth(h switchboard.Health) bool { return sameHealth(h, switchboard.Health{}) }

// wantTraffic fails unless in has the weight and zone given.
func wantTraffic(t *testing.T, how string, in switchboard.Instance, weight int, zone string) {
	t.Helper()
	if in.Weight != weight || in.Zone != zone {
		t.Fatalf("%s: %s has weight %d, zone %q; want %d, %q", how, in.ID, in.Weight, in.Zone, weight, zone)
	}
}

// everyRead fails unless Get, List (of every row) and a new watch's
// snapshot all give id with what check says is right.
func everyRead(t *testing.T, c switchboard.Catalog, id string, check func(how string, in switchboard.Instance)) {
	t.Helper()
	got, err := c.Get(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	check("Get", got)
	list, err := c.List(ctx(t), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, in := range list {
		if in.ID == id {
			found = true
			check("List", in)
		}
	}
	if !found {
		t.Fatalf("List (all rows): %s missing", id)
	}
	w := watch(t, c, switchboard.Query{All: true})
	found = false
	for i := range w.count() {
		if ev := w.next(i); ev.Instance.ID == id {
			found = true
			check("a new watch's snapshot", ev.Instance)
		}
	}
	if !found {
		t.Fatalf("a new watch (all rows): %s not in its snapshot", id)
	}
}

func testWeightZone(t *testing.T, c switchboard.Catalog) {
	w := watch(t, c, switchboard.Query{})
	// Two instances of one name: given ids, since an empty one is the
	// name on kube://.
	first := sample("traffic")
	first.ID = "traffic-1"
	a := mustRegister(t, c, first)
	wantTraffic(t, "Register without a weight", a, switchboard.DefaultWeight, "")
	in := sample("traffic")
	in.ID = "traffic-2"
	in.Weight, in.Zone = 250, "eu-west-1a"
	b := mustRegister(t, c, in)
	wantTraffic(t, "Register", b, 250, "eu-west-1a")
	ev := w.next(0)
	expect(t, ev, switchboard.EventAdded, "", a.ID)
	wantTraffic(t, "Watch", ev.Instance, switchboard.DefaultWeight, "")
	ev = w.next(1)
	expect(t, ev, switchboard.EventAdded, "", b.ID)
	wantTraffic(t, "Watch", ev.Instance, 250, "eu-west-1a")
	everyRead(t, c, a.ID, func(how string, in switchboard.Instance) {
		wantTraffic(t, how, in, switchboard.DefaultWeight, "")
	})
	everyRead(t, c, b.ID, func(how string, in switchboard.Instance) { wantTraffic(t, how, in, 250, "eu-west-1a") })
	if got, err := c.List(ctx(t), switchboard.Query{Name: "traffic"}); err != nil || len(got) != 2 {
		t.Fatalf("List of the default query: %+v %v", got, err)
	}

	// A new weight or zone is a change: one update, a new revision.
	upd := b
	upd.Weight, upd.Zone = switchboard.MaxWeight, "eu-west-1b"
	b2 := mustRegister(t, c, upd)
	wantTraffic(t, "Register of a new weight and zone", b2, switchboard.MaxWeight, "eu-west-1b")
	if b.Revision != 0 && b2.Revision <= b.Revision {
		t.Fatalf("a new weight and zone kept revision %d (was %d)", b2.Revision, b.Revision)
	}
	ev = w.next(2)
	expect(t, ev, switchboard.EventUpdated, "", b.ID)
	wantTraffic(t, "Watch of the update", ev.Instance, switchboard.MaxWeight, "eu-west-1b")
	// Weight 0 in a re-registration is the default too, and a zone can
	// be cleared.
	upd = b2
	upd.Weight, upd.Zone = 0, ""
	b3 := mustRegister(t, c, upd)
	wantTraffic(t, "Register with weight 0 and no zone", b3, switchboard.DefaultWeight, "")
	ev = w.next(3)
	expect(t, ev, switchboard.EventUpdated, "", b.ID)
	wantTraffic(t, "Watch of the update", ev.Instance, switchboard.DefaultWeight, "")
	everyRead(t, c, b.ID, func(how string, in switchboard.Instance) {
		wantTraffic(t, how, in, switchboard.DefaultWeight, "")
	})
	// The same weight and zone again: no change.
	mustRegister(t, c, b3)
	if err := c.Deregister(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	expect(t, w.next(4), switchboard.EventRemoved, switchboard.ReasonDeregistered, a.ID)
}

func testInvalidTraffic(t *testing.T, c switchboard.Catalog) {
	in := sample("keep")
	in.Weight, in.Zone = 200, "zone-a"
	good := mustRegister(t, c, in)
	for _, tc := range []struct {
		field string
		mut   func(*switchboard.Instance)
	}{
		{"weight", func(in *switchboard.Instance) { in.Weight = -1 }},
		{"weight", func(in *switchboard.Instance) { in.Weight = switchboard.MaxWeight + 1 }},
		{"zone", func(in *switchboard.Instance) { in.Zone = "eu west" }},
		{"zone", func(in *switchboard.Instance) { in.Zone = "-a" }},
		{"zone", func(in *switchboard.Instance) { in.Zone = strings.Repeat("z", 64) }},
		{"zone", func(in *switchboard.Instance) { in.Zone = "a\x00b" }},
		{"check.target", func(in *switchboard.Instance) {
			in.Check = &switchboard.Check{Target: "ftp://127.0.0.1:21", Interval: time.Second}
		}},
		{"check.interval", func(in *switchboard.Instance) {
			in.Check = &switchboard.Check{Target: "tcp://127.0.0.1:1"}
		}},
	} {
		for _, id := range []string{good.ID, "new-one"} {
			bad := good
			bad.ID = id
			tc.mut(&bad)
			_, err := c.Register(ctx(t), bad)
			wantField(t, err, tc.field)
		}
	}
	if _, err := c.Get(ctx(t), "new-one"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("a refused registration stored a row: %v", err)
	}
	got, err := c.Get(ctx(t), good.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Weight != 200 || got.Zone != "zone-a" || got.Check != nil || got.Revision != good.Revision {
		t.Fatalf("the stored row changed: %+v, was %+v", got, good)
	}
	unchanged(t, c, good)
}

// testRegisterSetsNoTrafficState: Draining and Health in a registration
// are ignored: a new row without a check is neither draining nor judged.
func testRegisterSetsNoState(t *testing.T, c switchboard.Catalog) {
	in := sample("plain")
	in.Draining = true
	in.Health = switchboard.Health{Status: switchboard.StatusCritical, Output: "told", Since: time.Unix(1e9, 0)}
	a := mustRegister(t, c, in)
	everyRead(t, c, a.ID, func(how string, in switchboard.Instance) {
		if in.Draining || !noHealth(in.Health) || in.Check != nil {
			t.Fatalf("%s: a registration set draining %v, health %+v, check %+v", how, in.Draining, in.Health, in.Check)
		}
	})
	if got, err := c.List(ctx(t), switchboard.Query{}); err != nil || len(got) != 1 {
		t.Fatalf("List of the default query: %+v %v", got, err)
	}
}

// testCheckStartsCritical: a new row with a check is stored with the check
// as Normalize fills it, and starts critical ("not checked yet", since its
// registration by the catalog's clock): out of the default List and
// Watch, in those of every row.
func testCheckStartsCritical(t *testing.T, c switchboard.Catalog) {
	w := watch(t, c, switchboard.Query{})
	all := watch(t, c, switchboard.Query{All: true})
	in := checked("probed")
	in.Health = switchboard.Health{Status: switchboard.StatusPassing}
	want, err := switchboard.Normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Now(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	a := mustRegister(t, c, in)
	after, err := c.Now(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	p := mustRegister(t, c, sample("plain"))
	startsCritical := func(how string, in switchboard.Instance) {
		t.Helper()
		if in.Check == nil || *in.Check != *want.Check {
			t.Fatalf("%s: check %+v, want %+v", how, in.Check, want.Check)
		}
		if in.Health.Status != switchboard.StatusCritical || in.Health.Output != "not checked yet" {
			t.Fatalf("%s: a new row with a check has health %+v, want critical, \"not checked yet\"", how, in.Health)
		}
		if in.Health.Since.Before(before.Truncate(time.Millisecond)) || in.Health.Since.After(after) {
			t.Fatalf("%s: health since %v, not within the registration (%v to %v by the catalog's clock)", how, in.Health.Since, before, after)
		}
		if in.Serving() || in.Status() != switchboard.StatusCritical {
			t.Fatalf("%s: serving %v, status %s", how, in.Serving(), in.Status())
		}
	}
	startsCritical("Register", a)
	everyRead(t, c, a.ID, startsCritical)
	list, err := c.List(ctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != p.ID {
		t.Fatalf("List of the default query: %v, want only %s (the checked row is critical)", ids(list), p.ID)
	}
	if got, err := c.List(ctx(t), switchboard.Query{Name: "probed", All: true}); err != nil || len(got) != 1 {
		t.Fatalf("List of every row named probed: %+v %v", got, err)
	}
	// The default watcher's first event is the plain row: the checked
	// one, registered before, was never shown.
	expect(t, w.next(0), switchboard.EventAdded, "", p.ID)
	ev := all.next(0)
	expect(t, ev, switchboard.EventAdded, "", a.ID)
	startsCritical("a watch of every row", ev.Instance)
	expect(t, all.next(1), switchboard.EventAdded, "", p.ID)
	if n := watch(t, c, switchboard.Query{Name: "probed"}).count(); n != 0 {
		t.Fatalf("a new default watch's snapshot holds %d critical rows", n)
	}
}

// testChecksRefused: a catalog that stores no checks is no HealthSetter,
// and refuses a registration with a check, of a new row or over a stored
// one, with an invalid "check", writing nothing.
func testChecksRefused(t *testing.T, c switchboard.Catalog) {
	if _, ok := c.(switchboard.HealthSetter); ok {
		t.Fatal("a catalog that stores no checks is a switchboard.HealthSetter")
	}
	w := watch(t, c, switchboard.Query{All: true})
	good := mustRegister(t, c, sample("probed"))
	expect(t, w.next(0), switchboard.EventAdded, "", good.ID)
	for _, id := range []string{good.ID, "new-one"} {
		in := checked("probed")
		in.ID = id
		_, err := c.Register(ctx(t), in)
		wantField(t, err, "check")
	}
	if _, err := c.Get(ctx(t), "new-one"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("a refused registration stored a row: %v", err)
	}
	got, err := c.Get(ctx(t), good.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Check != nil || !noHealth(got.Health) || got.Revision != good.Revision {
		t.Fatalf("the stored row changed: check %+v, health %+v at revision %d (was %d)", got.Check, got.Health, got.Revision, good.Revision)
	}
	unchanged(t, c, good)
	// The next event is this update's: the refusals sent none.
	upd := good
	upd.Version = "2.0.0"
	mustRegister(t, c, upd)
	expect(t, w.next(1), switchboard.EventUpdated, "", good.ID)
	if w.count() != 2 {
		t.Fatalf("events:%s", w.dump())
	}
}

// testRegisterKeepsState: a re-registration, changed or not, keeps the
// stored Draining and Health, whatever it carries; one that removes the
// check clears Health (nothing would judge the row again), and one that
// adds a check to a row without one starts it critical, as a new row.
// withCheck false (a catalog that stores no checks) registers the row
// without one.
func testRegisterKeepsState(t *testing.T, c switchboard.Catalog, withCheck bool) {
	d, canDrain := c.(switchboard.Drainer)
	h, canJudge := c.(switchboard.HealthSetter)
	if !canDrain && !canJudge {
		t.Skip("the catalog neither drains nor stores check results")
	}
	first := checked("kept")
	if !withCheck {
		first = sample("kept")
	}
	a := mustRegister(t, c, first)
	want := a
	if canDrain {
		var err error
		if want, err = d.Drain(ctx(t), a.ID, true); err != nil {
			t.Fatal(err)
		}
	}
	if canJudge {
		var err error
		if want, err = h.SetHealth(ctx(t), a.ID, switchboard.Health{Status: switchboard.StatusWarning, Output: "HTTP 429"}); err != nil {
			t.Fatal(err)
		}
	}
	same := func(how string, in switchboard.Instance) {
		t.Helper()
		if in.Draining != want.Draining || in.Health.Status != want.Health.Status || in.Health.Output != want.Health.Output ||
			!in.Health.Since.Equal(want.Health.Since) {
			t.Fatalf("%s: draining %v, health %+v; want them kept: %v, %+v", how, in.Draining, in.Health, want.Draining, want.Health)
		}
	}
	for i, mut := range []func(*switchboard.Instance){
		func(*switchboard.Instance) {}, // identical: a renewal
		func(in *switchboard.Instance) { in.Version = "9.9.9" },
		func(in *switchboard.Instance) { in.Draining = !want.Draining },
		func(in *switchboard.Instance) {
			in.Health = switchboard.Health{Status: switchboard.StatusCritical, Output: "told by the registrant"}
			in.Weight = 7
		},
		func(in *switchboard.Instance) {
			if in.Check != nil {
				in.Check.Interval = 20 * time.Second
			} else {
				in.Zone = "zone-b"
			}
		},
	} {
		in := want
		if want.Check != nil {
			ck := *want.Check
			in.Check = &ck
		}
		mut(&in)
		got := mustRegister(t, c, in)
		same("Register", got)
		if i == 0 && got.Revision != want.Revision {
			t.Fatalf("an identical re-registration changed the revision from %d to %d", want.Revision, got.Revision)
		}
		everyRead(t, c, a.ID, same)
	}
	if !withCheck {
		return
	}
	in := want
	in.Check = nil
	got := mustRegister(t, c, in)
	check := func(how string, in switchboard.Instance) {
		t.Helper()
		if in.Check != nil || !noHealth(in.Health) || in.Draining != want.Draining {
			t.Fatalf("%s: after the check was removed: check %+v, health %+v, draining %v; want no check, no health, draining %v",
				how, in.Check, in.Health, in.Draining, want.Draining)
		}
	}
	check("Register", got)
	everyRead(t, c, a.ID, check)
	// A check added again starts as on a new row: nothing has judged it.
	in.Check = first.Check
	before, err := c.Now(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got = mustRegister(t, c, in)
	after, err := c.Now(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(how string, in switchboard.Instance) {
		t.Helper()
		if in.Check == nil || in.Health.Status != switchboard.StatusCritical || in.Health.Output != "not checked yet" ||
			in.Health.Since.Before(before.Truncate(time.Millisecond)) || in.Health.Since.After(after) || in.Draining != want.Draining {
			t.Fatalf("%s: after a check was added: check %+v, health %+v, draining %v; want critical, \"not checked yet\" since the registration (%v to %v), draining %v",
				how, in.Check, in.Health, in.Draining, before, after, want.Draining)
		}
	}
	fresh("Register", got)
	everyRead(t, c, a.ID, fresh)
}
