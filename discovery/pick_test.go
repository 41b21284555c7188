package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// fleet is a cache following a SQLite catalog, and the catalog's writes of
// registrations and of the traffic state (Register with a weight and a
// zone, Drain, SetHealth); each write returns once the cache reflects it.
type fleet struct {
	t     *testing.T
	cat   switchboard.Catalog
	cache *discovery.Cache
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	cat := testkit.OpenSQLite(t)
	c, err := discovery.New(context.Background(), cat, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &fleet{t: t, cat: cat, cache: c}
}

// register stores a registration of id in zone with weight (capability
// "svc", name "svc", type "writer"): a new row, or a new version of it.
func (f *fleet) register(id, zone string, weight int) {
	f.t.Helper()
	f.registerTTL(id, zone, weight, time.Hour)
}

func (f *fleet) registerTTL(id, zone string, weight int, ttl time.Duration) {
	f.t.Helper()
	in := switchboard.Instance{ID: id, Name: "svc", Type: "writer", Address: "10.0.0.1:1",
		Capabilities: []string{"svc"}, Zone: zone, Weight: weight, TTL: ttl,
		Version: fmt.Sprint(time.Now().UnixNano())} // each registration a change the test can wait for
	if _, err := f.cat.Register(context.Background(), in); err != nil {
		f.t.Fatal(err)
	}
	testkit.WaitUntil(f.t, id+" cached", func() bool {
		got, ok := f.cache.Get(id)
		return ok && got.Version == in.Version
	})
}

func (f *fleet) drain(id string, draining bool) {
	f.t.Helper()
	if _, err := f.cat.(switchboard.Drainer).Drain(context.Background(), id, draining); err != nil {
		f.t.Fatal(err)
	}
	testkit.WaitUntil(f.t, fmt.Sprintf("%s draining %v in the cache", id, draining), func() bool {
		got, ok := f.cache.Get(id)
		return ok && got.Draining == draining
	})
}

// setHealth records a check's result; a critical instance leaves the
// catalog's default watch, and so the cache.
func (f *fleet) setHealth(id string, st switchboard.Status) {
	f.t.Helper()
	if _, err := f.cat.(switchboard.HealthSetter).SetHealth(context.Background(), id, switchboard.Health{Status: st, Output: "probe"}); err != nil {
		f.t.Fatal(err)
	}
	testkit.WaitUntil(f.t, fmt.Sprintf("%s %s in the cache", id, st), func() bool {
		got, ok := f.cache.Get(id)
		if st == switchboard.StatusCritical {
			return !ok
		}
		return ok && got.Health.Status == st
	})
}

func (f *fleet) picker(q switchboard.Query, p discovery.Policy, z discovery.ZonePreference) *discovery.Picker {
	f.t.Helper()
	pk, err := f.cache.NewPicker(q, discovery.PickOptions{Policy: p, Zone: z})
	if err != nil {
		f.t.Fatal(err)
	}
	return pk
}

var policies = []discovery.Policy{discovery.RoundRobin, discovery.Random, discovery.WeightedRoundRobin, discovery.WeightedRandom}

// count picks n times and returns how often each id was picked.
func count(t *testing.T, p *discovery.Picker, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		in, ok := p.Pick()
		if !ok {
			t.Fatal("no pick")
		}
		got[in.ID]++
	}
	return got
}

// shares checks that the picks of each id are within 3 points of the
// share want gives it.
func shares(t *testing.T, what string, got map[string]int, want map[string]float64) {
	t.Helper()
	total := 0
	for _, k := range got {
		total += k
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Fatalf("%s: picked %s, which has no share: %v", what, id, got)
		}
	}
	for id, share := range want {
		if pct := 100 * float64(got[id]) / float64(total); math.Abs(pct-100*share) > 3 {
			t.Fatalf("%s: %s got %.1f%% of %d picks, want %.0f%% ± 3: %v", what, id, pct, total, 100*share, got)
		}
	}
	t.Logf("%s: %v", what, got)
}

// TestWeightedShares: weights 100/100/200 give 25/25/50 % of 20,000
// weighted picks, by capability and by name; the unweighted policies give
// each a third.
func TestWeightedShares(t *testing.T) {
	f := newFleet(t)
	f.register("a", "eu-1", 100)
	f.register("b", "eu-1", 100)
	f.register("c", "eu-2", 200)
	weighted := map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5}
	even := map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}
	for _, q := range []switchboard.Query{{Capability: "svc"}, {Name: "svc"}} {
		for _, p := range policies {
			want := even
			if p == discovery.WeightedRoundRobin || p == discovery.WeightedRandom {
				want = weighted
			}
			shares(t, fmt.Sprintf("%v %+v", p, q), count(t, f.picker(q, p, discovery.ZonePreference{}), 20000), want)
		}
	}
}

// TestSmoothWeightedRoundRobinIsExact: nginx's own example (weights 5, 1,
// 1 pick a a b a c a a, in every cycle of 7), and 100/100/200 (a cycle of
// 4 picks: c twice, a and b once), from many goroutines at once.
func TestSmoothWeightedRoundRobinIsExact(t *testing.T) {
	f := newFleet(t)
	f.register("a", "", 500)
	f.register("b", "", 100)
	f.register("c", "", 100)
	p := f.picker(switchboard.Query{Capability: "svc"}, discovery.WeightedRoundRobin, discovery.ZonePreference{})
	for cycle := range 10 {
		var seq []string
		for range 7 {
			in, _ := p.Pick()
			seq = append(seq, in.ID)
		}
		if got := strings.Join(seq, " "); got != "a a b a c a a" {
			t.Fatalf("cycle %d: %s, want nginx's a a b a c a a", cycle, got)
		}
	}

	f.register("a", "", 100)
	f.register("b", "", 100)
	f.register("c", "", 200)
	const goroutines, per = 8, 2500 // 20,000 picks: 5,000 cycles of 4
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			mine := map[string]int{}
			for range per {
				in, _ := p.Pick()
				mine[in.ID]++
			}
			mu.Lock()
			defer mu.Unlock()
			for id, k := range mine {
				got[id] += k
			}
		})
	}
	wg.Wait()
	// The change of weights left the round mid-way; the picks after it
	// are whole cycles but for at most one round's offset.
	for id, want := range map[string]int{"a": 5000, "b": 5000, "c": 10000} {
		if d := got[id] - want; d < -2 || d > 2 {
			t.Fatalf("20,000 smooth picks: %v, want a 5000, b 5000, c 10000 (within a round)", got)
		}
	}
	// From here, every 4 picks are exactly one cycle.
	for range 100 {
		got := map[string]int{}
		for range 4 {
			in, _ := p.Pick()
			got[in.ID]++
		}
		if got["a"] != 1 || got["b"] != 1 || got["c"] != 2 {
			t.Fatalf("a cycle of 4 picks: %v, want a 1, b 1, c 2", got)
		}
	}
}

// TestSmoothWeightedRoundRobinAcrossVersions: a change that leaves the
// weights as they are (an address, metadata) after every few picks does
// not restart the round, so the shares hold under churn.
func TestSmoothWeightedRoundRobinAcrossVersions(t *testing.T) {
	f := newFleet(t)
	f.register("a", "", 100)
	f.register("b", "", 100)
	f.register("c", "", 200)
	p := f.picker(switchboard.Query{Name: "svc"}, discovery.WeightedRoundRobin, discovery.ZonePreference{})
	got := map[string]int{}
	for i := range 1000 {
		in, _ := p.Pick()
		got[in.ID]++
		if i%3 == 2 {
			f.register([]string{"a", "b", "c"}[i%9/3], "", map[int]int{0: 100, 1: 100, 2: 200}[i%9/3])
		}
	}
	shares(t, "smooth picks with a new version after every 3", got, map[string]float64{"a": 0.25, "b": 0.25, "c": 0.5})
}

// TestNotServingNeverPicked: a draining instance, one whose check is
// critical and one past its TTL are never picked, by any policy or zone
// preference, and lookups leave them out. The draining one stays in the
// cache (Get and All show it); the critical and the expired ones leave the
// catalog's watch. Undrained and passing again, they are picked again.
// (The cache's own test of random events checks that instances a catalog
// hands over stale or critical are not picked either.)
func TestNotServingNeverPicked(t *testing.T) {
	f := newFleet(t)
	for _, id := range []string{"ok-1", "ok-2", "drained", "critical"} {
		f.register(id, "eu-1", 100)
	}
	f.register("far", "eu-2", 100)
	f.registerTTL("expired", "eu-1", 100, 300*time.Millisecond) // never renewed
	f.drain("drained", true)
	f.setHealth("critical", switchboard.StatusCritical)
	testkit.WaitUntil(t, "the expired instance left the cache", func() bool { _, ok := f.cache.Get("expired"); return !ok })
	out := map[string]bool{"drained": true, "critical": true, "expired": true}
	for _, q := range []switchboard.Query{{Capability: "svc"}, {Name: "svc"}} {
		for _, p := range policies {
			for _, z := range []discovery.ZonePreference{{}, discovery.PreferZone("eu-1", 0), discovery.PreferZone("eu-1", 3)} {
				for id := range count(t, f.picker(q, p, z), 2000) {
					if out[id] {
						t.Fatalf("%v %+v %+v picked %s", p, q, z, id)
					}
				}
			}
		}
	}
	for _, fn := range []func() (switchboard.Instance, bool){
		func() (switchboard.Instance, bool) { return f.cache.PickRoundRobin("svc") },
		func() (switchboard.Instance, bool) { return f.cache.PickRandom("svc") },
	} {
		for range 500 {
			if in, _ := fn(); out[in.ID] {
				t.Fatalf("PickRoundRobin or PickRandom picked %s", in.ID)
			}
		}
	}
	ids := func(ins []switchboard.Instance) string { return testkit.JoinIDs(ins) }
	for what, got := range map[string]string{
		"ByCapability": ids(f.cache.ByCapability("svc")),
		"ByName":       ids(f.cache.ByName("svc")),
		"ByType":       ids(f.cache.ByType("writer")),
		"Lookup":       ids(f.cache.Lookup(switchboard.Query{Capability: "svc", Type: "writer"})),
	} {
		if got != "far ok-1 ok-2" {
			t.Errorf("%s: %s, want the serving far ok-1 ok-2", what, got)
		}
	}
	if n := f.cache.Count(switchboard.Query{Capability: "svc"}); n != 3 {
		t.Errorf("Count = %d, want 3 serving", n)
	}
	if got := ids(f.cache.All()); got != "drained far ok-1 ok-2" {
		t.Errorf("All: %s, want every instance held, the draining one too", got)
	}
	if in, ok := f.cache.Get("drained"); !ok || !in.Draining || in.Serving() {
		t.Errorf("Get(drained) = %+v, %v; want the draining instance", in, ok)
	}

	f.drain("drained", false)
	f.setHealth("critical", switchboard.StatusPassing)
	got := count(t, f.picker(switchboard.Query{Capability: "svc"}, discovery.WeightedRoundRobin, discovery.ZonePreference{}), 500)
	if got["drained"] != 100 || got["critical"] != 100 || got["expired"] != 0 {
		t.Fatalf("after undrain and a passing check: %v, want drained and critical 100 each, expired none", got)
	}
}

// TestPreferZone: picks stay in the caller's zone while it has enough
// serving instances (a count, or a share of the weight), and fall back to
// every zone when it has too few.
func TestPreferZone(t *testing.T) {
	f := newFleet(t)
	f.register("near", "eu-1", 400)
	for _, id := range []string{"far-1", "far-2", "far-3"} {
		f.register(id, "eu-2", 100)
	}
	zones := func(p *discovery.Picker) map[string]int {
		got := map[string]int{}
		for range 2000 {
			in, _ := p.Pick()
			got[in.Zone]++
		}
		return got
	}
	q := switchboard.Query{Capability: "svc"}
	for _, c := range []struct {
		z      discovery.ZonePreference
		onlyIn string // "" when every zone is picked from
	}{
		{discovery.PreferZone("eu-1", 1), "eu-1"},                                       // one is enough
		{discovery.PreferZone("eu-1", 0), ""},                                           // fewer than the default 2: all
		{discovery.PreferZone("eu-1", 2), ""},                                           // fewer than 2: all
		{discovery.PreferZone("eu-2", 3), "eu-2"},                                       // 3 of 3
		{discovery.PreferZone("eu-2", 4), ""},                                           // fewer than 4: all
		{discovery.PreferZoneShare("eu-1", 0.5), "eu-1"},                                // 400 of 700
		{discovery.PreferZoneShare("eu-2", 0.5), ""},                                    // 300 of 700
		{discovery.ZonePreference{Zone: "eu-2", MinEligible: 4, MinShare: 0.4}, "eu-2"}, // either suffices
		{discovery.PreferZone("us-1", 0), ""},                                           // no instance there
	} {
		for _, p := range policies {
			got := zones(f.picker(q, p, c.z))
			if c.onlyIn != "" && (len(got) != 1 || got[c.onlyIn] == 0) || c.onlyIn == "" && len(got) != 2 {
				t.Fatalf("%v %+v: picks by zone %v, want only %q (empty: both zones)", p, c.z, got, c.onlyIn)
			}
		}
	}
	// The zone's only instance drains: the zone falls back to all, and
	// comes back when it is undrained.
	p := f.picker(q, discovery.WeightedRandom, discovery.PreferZone("eu-1", 1))
	f.drain("near", true)
	if got := zones(p); got["eu-1"] != 0 || got["eu-2"] != 2000 {
		t.Fatalf("zone drained: %v, want every pick in eu-2", got)
	}
	f.drain("near", false)
	if got := zones(p); got["eu-1"] != 2000 {
		t.Fatalf("zone undrained: %v, want every pick in eu-1", got)
	}
}

// TestWeightChangeThroughTheCatalog: a registration with a new weight
// changes the shares of the weighted picks.
func TestWeightChangeThroughTheCatalog(t *testing.T) {
	f := newFleet(t)
	f.register("a", "", 100)
	f.register("b", "", 100)
	q := switchboard.Query{Capability: "svc"}
	for _, p := range []discovery.Policy{discovery.WeightedRoundRobin, discovery.WeightedRandom} {
		shares(t, p.String()+" before", count(t, f.picker(q, p, discovery.ZonePreference{}), 20000), map[string]float64{"a": 0.5, "b": 0.5})
	}
	f.register("b", "", 300)
	for _, p := range []discovery.Policy{discovery.WeightedRoundRobin, discovery.WeightedRandom} {
		shares(t, p.String()+" after b's weight is 300", count(t, f.picker(q, p, discovery.ZonePreference{}), 20000), map[string]float64{"a": 0.25, "b": 0.75})
	}
}

// TestPicksAllocateNothing: every policy, with and without a zone
// preference, and while a member does not serve, allocates nothing per
// pick once the version's table is built.
func TestPicksAllocateNothing(t *testing.T) {
	f := newFleet(t)
	for i := range 30 {
		f.register(fmt.Sprintf("i-%02d", i), []string{"eu-1", "eu-2", "eu-3"}[i%3], []int{100, 100, 200}[i%3])
	}
	check := func(what string) {
		t.Helper()
		for _, q := range []switchboard.Query{{Capability: "svc"}, {Name: "svc"}} {
			for _, p := range policies {
				for _, z := range []discovery.ZonePreference{{}, discovery.PreferZone("eu-2", 5), discovery.PreferZoneShare("eu-3", 0.9)} {
					pk := f.picker(q, p, z)
					pk.Pick() // builds the table of this version
					if n := testing.AllocsPerRun(1000, func() { pk.Pick() }); n != 0 {
						t.Errorf("%s: %v %+v %+v: %v allocations per pick", what, p, q, z, n)
					}
				}
			}
		}
	}
	check("every member serving")
	f.drain("i-04", true)
	check("one member draining")
}

// TestNewPickerSaysWhatIsWrong: a query that is not one capability or one
// name, an unknown policy and a zone preference out of range are errors.
func TestNewPickerSaysWhatIsWrong(t *testing.T) {
	f := newFleet(t)
	for _, c := range []struct {
		q    switchboard.Query
		opts discovery.PickOptions
		want string
	}{
		{switchboard.Query{}, discovery.PickOptions{}, "set Capability or Name"},
		{switchboard.Query{Capability: "a", Name: "b"}, discovery.PickOptions{}, "set Capability or Name"},
		{switchboard.Query{Capability: "a", Type: "writer"}, discovery.PickOptions{}, "nothing else"},
		{switchboard.Query{Capability: "a"}, discovery.PickOptions{Policy: 9}, "want RoundRobin"},
		{switchboard.Query{Capability: "a"}, discovery.PickOptions{Zone: discovery.PreferZone("eu-1", -1)}, "must not be negative"},
		{switchboard.Query{Capability: "a"}, discovery.PickOptions{Zone: discovery.PreferZoneShare("eu-1", 1.5)}, "from 0 to 1"},
		{switchboard.Query{Capability: "a"}, discovery.PickOptions{Zone: discovery.PreferZoneShare("eu-1", math.NaN())}, "from 0 to 1"},
	} {
		_, err := f.cache.NewPicker(c.q, c.opts)
		if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPicker(%+v, %+v) = %v, want ErrInvalid saying %q", c.q, c.opts, err, c.want)
		}
	}
	p, err := f.cache.NewPicker(switchboard.Query{Capability: "absent"}, discovery.PickOptions{Policy: discovery.WeightedRandom})
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := p.Pick(); ok {
		t.Fatalf("picked %s from a capability nobody has", in.ID)
	}
	if got := slices.Collect(func(yield func(string) bool) {
		for _, p := range policies {
			if !yield(p.String()) {
				return
			}
		}
	}); strings.Join(got, ",") != "round_robin,random,weighted_round_robin,weighted_random" {
		t.Errorf("policy names: %v", got)
	}
}

// BenchmarkPick measures weighted and zone-preferring picks among 100,000
// instances: the capability "all" that they all share and "cap-7" of
// 5,000, weights 100, 100 and 200, three zones. "zone" prefers zone-1
// while it has at least 2 serving instances (it has a third of them).
// The table of the version is built before the timer starts
// (BenchmarkBuildTable measures that).
func BenchmarkPick(b *testing.B) {
	const n = 100000
	fc := &chanCatalog{ch: make(chan switchboard.Event, 1024)}
	go func() {
		for i := range n {
			in := discovery.FleetInstance(i)
			in.Weight = []int{100, 100, 200}[i/3%3]
			in.Zone = []string{"zone-0", "zone-1", "zone-2"}[i%3]
			fc.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in}
		}
		fc.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	}()
	c, err := discovery.New(context.Background(), fc, discovery.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { close(fc.ch); c.Close() })
	for _, cp := range []string{"all", "cap-7"} {
		for _, p := range []discovery.Policy{discovery.WeightedRoundRobin, discovery.WeightedRandom, discovery.RoundRobin} {
			for _, z := range []discovery.ZonePreference{{}, discovery.PreferZone("zone-1", 2)} {
				name := fmt.Sprintf("%s/%v", cp, p)
				if z.Zone != "" {
					name += "/zone"
				}
				b.Run(name, func(b *testing.B) {
					pk, err := c.NewPicker(switchboard.Query{Capability: cp}, discovery.PickOptions{Policy: p, Zone: z})
					if err != nil {
						b.Fatal(err)
					}
					pk.Pick()
					b.ReportAllocs()
					defer discovery.ReportCPU(b)()
					for b.Loop() {
						if _, ok := pk.Pick(); !ok {
							b.Fatal("no pick")
						}
					}
				})
			}
		}
	}
	b.Run("all/weighted_round_robin/parallel", func(b *testing.B) {
		pk, _ := c.NewPicker(switchboard.Query{Capability: "all"}, discovery.PickOptions{Policy: discovery.WeightedRoundRobin})
		pk.Pick()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				pk.Pick()
			}
		})
	})
	b.Run("all/weighted_random/parallel", func(b *testing.B) {
		pk, _ := c.NewPicker(switchboard.Query{Capability: "all"}, discovery.PickOptions{Policy: discovery.WeightedRandom})
		pk.Pick()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				pk.Pick()
			}
		})
	})
}
