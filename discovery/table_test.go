package discovery

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// verifyTable checks the pick table of bucket b (key's) against want, its
// serving members by name then id: the table lists exactly them, by
// weight (heaviest first), zone, name and id; its classes and zone sets
// cover that list; every policy, with and without a zone preference,
// picks among them; and smooth weighted round robin on a fresh state
// picks what nginx's algorithm, run member by member over the same list,
// picks.
func verifyTable(t *testing.T, key string, b *bucket, want []switchboard.Instance) {
	t.Helper()
	if b.serving() != len(want) {
		t.Fatalf("%s: %d serving members counted, want %d", key, b.serving(), len(want))
	}
	if len(want) == 0 {
		for _, p := range []Policy{RoundRobin, Random, WeightedRoundRobin, WeightedRandom} {
			if in := b.pick(p, &ZonePreference{Zone: "eu-1"}); in != nil {
				t.Fatalf("%s: %v picked %s from no serving member", key, p, in.ID)
			}
		}
		return
	}
	tab := buildTable(b)
	order := slices.Clone(want)
	slices.SortStableFunc(order, func(x, y switchboard.Instance) int {
		return cmp.Or(cmp.Compare(y.TrafficWeight(), x.TrafficWeight()), strings.Compare(x.Zone, y.Zone))
	})
	if len(tab.list) != len(order) {
		t.Fatalf("%s: table of %d, want %d", key, len(tab.list), len(order))
	}
	for i, p := range tab.list {
		if p.ID != order[i].ID {
			t.Fatalf("%s: table[%d] = %s, want %s", key, i, p.ID, order[i].ID)
		}
	}
	checkSet := func(s *set, zone string) {
		t.Helper()
		n, total := 0, int64(0)
		for i, c := range s.classes {
			if i > 0 && c.w >= s.classes[i-1].w {
				t.Fatalf("%s zone %q: classes out of order", key, zone)
			}
			for _, p := range tab.list[c.lo : c.lo+c.n] {
				if int64(p.TrafficWeight()) != c.w || zone != "" && p.Zone != zone {
					t.Fatalf("%s zone %q: %s (weight %d, zone %q) in the class of %d", key, zone, p.ID, p.TrafficWeight(), p.Zone, c.w)
				}
			}
			n += c.n
			total += int64(c.n) * c.w
			if c.cum != total {
				t.Fatalf("%s zone %q: class %d cum %d, want %d", key, zone, i, c.cum, total)
			}
		}
		var wn int
		var wt int64
		for _, in := range want {
			if zone == "" || in.Zone == zone {
				wn++
				wt += int64(in.TrafficWeight())
			}
		}
		if n != wn || s.n != wn || s.total != wt || total != wt {
			t.Fatalf("%s zone %q: %d members of weight %d (counted %d, %d), want %d, %d", key, zone, n, total, s.n, s.total, wn, wt)
		}
		for i := range s.n {
			if p := s.at(tab, i); zone != "" && p.Zone != zone {
				t.Fatalf("%s zone %q: at(%d) is of zone %q", key, zone, i, p.Zone)
			}
		}
	}
	checkSet(&tab.all, "")
	zones := map[string]bool{}
	for _, in := range want {
		if in.Zone != "" {
			zones[in.Zone] = true
		}
	}
	if len(tab.zones) != len(zones) {
		t.Fatalf("%s: %d zone sets, want %d", key, len(tab.zones), len(zones))
	}
	for i := range tab.zones {
		z := &tab.zones[i]
		if i > 0 && z.zone <= tab.zones[i-1].zone || tab.zone(z.zone) != z {
			t.Fatalf("%s: zone sets out of order", key)
		}
		checkSet(z, z.zone)
	}
	if tab.zone("absent") != nil {
		t.Fatalf("%s: a set for a zone no member has", key)
	}

	// Every policy, preferring a zone or not, picks a serving member.
	ids := map[string]bool{}
	for _, in := range want {
		ids[in.ID] = true
	}
	for _, p := range []Policy{RoundRobin, Random, WeightedRoundRobin, WeightedRandom} {
		for _, z := range []ZonePreference{{}, {Zone: "eu-1"}, {Zone: "eu-2", MinEligible: 2}, {Zone: "eu-1", MinShare: 0.5}} {
			in := b.pick(p, &z)
			if in == nil || !ids[in.ID] {
				t.Fatalf("%s: %v %+v picked %v: not a serving member", key, p, z, in)
			}
			if z.local(tabZoneOr(tab, z.Zone), &tab.all) && in.Zone != z.Zone {
				t.Fatalf("%s: %v %+v picked %s of zone %q", key, p, z, in.ID, in.Zone)
			}
		}
	}

	// Smooth weighted round robin, from a fresh state, is nginx's.
	fresh := buildTable(b)
	ps := new(pickState)
	cur := make([]int64, len(fresh.list))
	for k := range min(2*int(fresh.all.total), 100) {
		best := 0
		for i, p := range fresh.list {
			cur[i] += int64(p.TrafficWeight())
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= fresh.all.total
		if got := ps.smooth(fresh, &fresh.all); got != fresh.list[best] {
			t.Fatalf("%s: smooth pick %d is %s, nginx's is %s", key, k, got.ID, fresh.list[best].ID)
		}
	}
}

// tabZoneOr returns tab's set of zone z, or an empty one.
func tabZoneOr(tab *table, z string) *set {
	if s := tab.zone(z); s != nil {
		return s
	}
	return &set{}
}
