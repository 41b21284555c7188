package discovery

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// model is the cache's expected content, kept the simplest way: a map
// from id to the instance the last event said.
type model struct {
	set   map[string]switchboard.Instance
	stale bool
	err   error
}

func (m *model) apply(ev switchboard.Event) {
	switch ev.Kind {
	case switchboard.EventAdded, switchboard.EventUpdated:
		m.set[ev.Instance.ID] = ev.Instance
	case switchboard.EventRemoved:
		delete(m.set, ev.Instance.ID)
	case switchboard.EventError:
		m.stale, m.err = true, ev.Err
	case switchboard.EventSynced:
		m.stale, m.err = false, nil
	}
}

// view builds from scratch what a lookup for q must return: every matching
// instance, by name then id.
func (m *model) view(q switchboard.Query) []switchboard.Instance {
	var out []switchboard.Instance
	for _, in := range m.set {
		if q.Matches(&in) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b switchboard.Instance) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return out
}

func (m *model) clone() *model {
	c := &model{set: make(map[string]switchboard.Instance, len(m.set)), stale: m.stale, err: m.err}
	for k, v := range m.set {
		c.set[k] = v
	}
	return c
}

var (
	rNames = []string{"acceptor", "writer", "router", "querier", "compactor", "w-1", "w-2", "zeta"}
	rTypes = []string{"", "writer", "router", "querier"}
	rCaps  = []string{"storage", "routing", "query_execution", "trace_ingestion", "kafka_ingestion", "x"}
	rZones = []string{"eu-1", "eu-2", "us-1"}
)

// gen makes random events over a bounded set of ids, so that instances are
// added, changed and removed many times over.
type gen struct {
	rng *rand.Rand
	m   *model
	ids []string
}

func (g *gen) instance(id string) switchboard.Instance {
	r := g.rng
	in := switchboard.Instance{
		ID:      id,
		Name:    rNames[r.IntN(len(rNames))],
		Type:    rTypes[r.IntN(len(rTypes))],
		Address: fmt.Sprintf("10.0.%d.%d:%d", r.IntN(4), r.IntN(4), 1000+r.IntN(3)),
		Version: []string{"", "1.0", "1.1"}[r.IntN(3)],
	}
	for _, c := range rCaps {
		if r.IntN(3) == 0 {
			in.Capabilities = append(in.Capabilities, c)
		}
	}
	switch r.IntN(4) {
	case 0:
	case 1:
		in.Metadata = map[string]string{"zone": rZones[r.IntN(len(rZones))]}
	default:
		in.Metadata = map[string]string{"zone": rZones[r.IntN(len(rZones))], "pod": fmt.Sprintf("p-%d", r.IntN(50))}
	}
	if r.IntN(8) == 0 {
		in.Components = []byte(fmt.Sprintf(`{"c":%d}`, r.IntN(3)))
	}
	// Times as a catalog sends them (UTC, or local, or zero), TTLs, and
	// now and then an instance already past its TTL: the cache holds them
	// apart from the instance's shape and must give them back unchanged.
	in.RegisteredAt = g.time()
	in.LastSeen = g.time()
	in.TTL = []time.Duration{0, time.Second, 10 * time.Second}[r.IntN(3)]
	in.Stale = r.IntN(10) == 0
	// The traffic state: weights of a few values (zero: an instance not
	// from a catalog, DefaultWeight), zones, and now and then a draining
	// or critical instance, which lookups and picks leave out.
	in.Weight = []int{0, 1, 100, 100, 200, switchboard.MaxWeight}[r.IntN(6)]
	in.Zone = []string{"", "eu-1", "eu-2"}[r.IntN(3)]
	in.Draining = r.IntN(10) == 0
	if r.IntN(10) == 0 {
		in.Health = switchboard.Health{Status: switchboard.StatusCritical, Output: "refused"}
	} else if r.IntN(5) == 0 {
		in.Health = switchboard.Health{Status: switchboard.StatusWarning}
	}
	return in
}

var rZone = time.FixedZone("r", 3600)

func (g *gen) time() time.Time {
	r := g.rng
	t := time.Unix(1.7e9+r.Int64N(1e6), r.Int64N(1e9))
	switch r.IntN(5) {
	case 0:
		return time.Time{}
	case 1:
		return t.Local()
	case 2:
		return t.In(rZone)
	case 3:
		return time.Unix(-1-r.Int64N(1e10), r.Int64N(1e9)).UTC() // before 1970
	default:
		return t.UTC()
	}
}

// event returns the next event; target is the population it steers to.
func (g *gen) event(target int) switchboard.Event {
	r := g.rng
	present := make([]string, 0, len(g.m.set))
	for id := range g.m.set {
		present = append(present, id)
	}
	slices.Sort(present) // map order is random: keep the run reproducible
	pick := func() string { return present[r.IntN(len(present))] }
	switch x := r.IntN(100); {
	case x < 2:
		return switchboard.Event{Kind: switchboard.EventError, Err: fmt.Errorf("outage %d", r.IntN(1000))}
	case x < 4:
		return switchboard.Event{Kind: switchboard.EventSynced}
	case x < 5: // a removal of what the cache never had
		return switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonDeregistered, Instance: switchboard.Instance{ID: "unknown"}}
	case len(present) > 0 && x < 35:
		in := g.m.set[pick()]
		switch r.IntN(4) {
		case 0: // a whole new content
			in = g.instance(in.ID)
		case 1:
			in.Name = rNames[r.IntN(len(rNames))]
		case 2:
			in.Capabilities = g.instance(in.ID).Capabilities
		default:
			// Metadata, or a change of the traffic state alone (a drain,
			// a check's result, a new weight).
			n := g.instance(in.ID)
			in.Metadata, in.Draining, in.Health, in.Weight = n.Metadata, n.Draining, n.Health, n.Weight
		}
		return switchboard.Event{Kind: switchboard.EventUpdated, Instance: in}
	case len(present) > 0 && (len(present) > target || x < 50):
		in := g.m.set[pick()]
		return switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonExpired, Instance: in}
	default:
		id := fmt.Sprintf("id-%05d", r.IntN(3*target+10))
		kind := switchboard.EventAdded
		if _, ok := g.m.set[id]; ok {
			kind = switchboard.EventUpdated // an upsert of a present id
		}
		return switchboard.Event{Kind: kind, Instance: g.instance(id)}
	}
}

// equal compares two instances field by field, by content.
func equal(a, b *switchboard.Instance) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Type == b.Type && a.Address == b.Address &&
		slices.Equal(a.Capabilities, b.Capabilities) && a.Version == b.Version &&
		maps.Equal(a.Metadata, b.Metadata) && bytes.Equal(a.Components, b.Components) &&
		a.TTL == b.TTL && a.RegisteredAt.Equal(b.RegisteredAt) && a.LastSeen.Equal(b.LastSeen) && a.Stale == b.Stale &&
		a.Weight == b.Weight && a.Zone == b.Zone && a.Draining == b.Draining && a.Health == b.Health &&
		a.RegisteredAt.Location() == b.RegisteredAt.Location() && a.LastSeen.Location() == b.LastSeen.Location()
}

// same compares a listing with the view built from scratch.
func same(t *testing.T, what string, got, want []switchboard.Instance) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d instances, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !equal(&got[i], &want[i]) {
			t.Fatalf("%s[%d]:\n got %+v\nwant %+v", what, i, got[i], want[i])
		}
	}
}

// verify checks every index of s against views of m built from scratch:
// All, Len, Get and Instances give every instance; the lookups and picks
// only the serving ones.
func verify(t *testing.T, s *Snapshot, m *model) {
	t.Helper()
	all := m.view(switchboard.Query{})
	filter := func(keep func(*switchboard.Instance) bool) []switchboard.Instance {
		var out []switchboard.Instance
		for i := range all {
			if all[i].Serving() && keep(&all[i]) {
				out = append(out, all[i])
			}
		}
		return out
	}
	same(t, "All", s.All(), all)
	var every []switchboard.Instance
	for in := range s.Instances(switchboard.Query{}) {
		every = append(every, in)
	}
	same(t, "Instances", every, all)
	if got, want := s.Count(switchboard.Query{}), len(filter(func(*switchboard.Instance) bool { return true })); got != want {
		t.Fatalf("Count() = %d, want %d serving", got, want)
	}
	if s.Len() != len(m.set) {
		t.Fatalf("Len = %d, want %d", s.Len(), len(m.set))
	}
	for _, n := range rNames {
		q := switchboard.Query{Name: n}
		want := filter(q.Matches)
		same(t, "ByName("+n+")", s.ByName(n), want)
		if got := s.Count(q); got != len(want) {
			t.Fatalf("Count(name %s) = %d", n, got)
		}
		b, _ := s.names.get(n)
		verifyTable(t, n, b, want)
	}
	for _, ty := range rTypes {
		// ByType("") is the instances without a type.
		want := filter(func(in *switchboard.Instance) bool { return in.Type == ty })
		same(t, "ByType("+ty+")", s.ByType(ty), want)
	}
	for _, c := range append(rCaps, "absent") {
		want := filter(switchboard.Query{Capability: c}.Matches)
		same(t, "ByCapability("+c+")", s.ByCapability(c), want)
		// Picks: round-robin visits every member once per cycle; random
		// stays inside the set.
		// Each pick is the whole instance as the last event said.
		seen := map[string]bool{}
		for range want {
			in, ok := s.PickRoundRobin(c)
			if !ok || !in.HasCapability(c) || seen[in.ID] {
				t.Fatalf("PickRoundRobin(%s) = %s, %v (seen: %v)", c, in.ID, ok, seen[in.ID])
			}
			if w := m.set[in.ID]; !equal(&in, &w) {
				t.Fatalf("PickRoundRobin(%s):\n got %+v\nwant %+v", c, in, w)
			}
			seen[in.ID] = true
		}
		in, ok := s.PickRandom(c)
		if ok != (len(want) > 0) || (ok && !in.HasCapability(c)) {
			t.Fatalf("PickRandom(%s) = %s, %v", c, in.ID, ok)
		}
		if w := m.set[in.ID]; ok && (!equal(&in, &w) || !w.Serving()) {
			t.Fatalf("PickRandom(%s):\n got %+v\nwant %+v", c, in, w)
		}
		verifyTable(t, c, s.capability(c), want)
	}
	// Combined queries go through Lookup, Count and Instances.
	for _, q := range []switchboard.Query{
		{Name: "writer", Capability: "storage"},
		{Type: "router", Capability: "routing"},
		{Name: "w-1", Type: "writer"},
		{Name: "absent", Capability: "storage"},
	} {
		want := filter(q.Matches)
		same(t, fmt.Sprintf("Lookup(%+v)", q), s.Lookup(q), want)
		if got := s.Count(q); got != len(want) {
			t.Fatalf("Count(%+v) = %d, want %d", q, got, len(want))
		}
	}
	for id, in := range m.set {
		got, ok := s.Get(id)
		if !ok || !equal(&got, &in) {
			t.Fatalf("Get(%s) = %+v, %v; want %+v", id, got, ok, in)
		}
	}
	if _, ok := s.Get("unknown"); ok {
		t.Fatal("Get of an unknown id found something")
	}
	stale, err := s.Stale()
	if stale != m.stale || !errors.Is(err, m.err) && err != m.err {
		t.Fatalf("Stale = %v, %v; want %v, %v", stale, err, m.stale, m.err)
	}
	// Every bucket kept is not empty, is under its key, and holds the
	// instances the index by id holds now.
	for _, idx := range []*pmap[*bucket]{&s.names, &s.types, &s.caps} {
		n := 0
		idx.each(func(k string, b *bucket) {
			n++
			if got, ok := idx.get(k); !ok || got != b {
				t.Fatalf("bucket %q not found under its key", k)
			}
			if b.n == 0 {
				t.Fatalf("empty bucket %q kept", k)
			}
			checkBucket(t, k, b)
			b.each(func(p *switchboard.Instance) bool {
				if q, _ := s.ids.get(p.ID); q != p {
					t.Fatalf("bucket %q holds a version of %s that is not the current one", k, p.ID)
				}
				return true
			})
		})
		if n != idx.n {
			t.Fatalf("index of %d buckets counts %d", n, idx.n)
		}
	}
}

// checkBucket verifies a bucket's structure: no empty or oversized chunk,
// the running counts and the count right, the members in strictly
// increasing order, and at(i) the i-th of them.
func checkBucket(t *testing.T, key string, b *bucket) {
	t.Helper()
	var all []*switchboard.Instance
	for j, c := range b.chunks {
		if len(c.m) == 0 || len(c.m) > chunkMax {
			t.Fatalf("bucket %q: chunk %d of %d members", key, j, len(c.m))
		}
		all = append(all, c.m...)
		if c.end != len(all) {
			t.Fatalf("bucket %q: chunk %d ends at %d, not %d", key, j, c.end, len(all))
		}
	}
	if len(all) != b.n {
		t.Fatalf("bucket %q counts %d members, holds %d", key, b.n, len(all))
	}
	for i, p := range all {
		if i > 0 && cmpNameID(all[i-1], p) >= 0 {
			t.Fatalf("bucket %q: members %d and %d out of order", key, i-1, i)
		}
		if b.at(i) != p {
			t.Fatalf("bucket %q: at(%d) is not its %d-th member", key, i, i)
		}
	}
}

type kept struct {
	s *Snapshot
	m *model
}

// TestRandomEventsAgainstAViewBuiltFromScratch applies long random
// sequences of added, updated, removed, stale (error) and synced events, in
// bursts of one to eight, publishing after each burst, and checks every
// index of the published version against views built from scratch. Older
// versions kept along the way must not have changed at the end.
func TestRandomEventsAgainstAViewBuiltFromScratch(t *testing.T) {
	defer func(old int) { chunkMax = old }(chunkMax)
	chunkMax = 8 // buckets of many chunks, which split and join
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	m := &model{set: map[string]switchboard.Instance{}}
	g := &gen{rng: rng, m: m}
	w := newWriter()
	var old []kept
	for step := 0; step < steps; step++ {
		// The population swings between a few and several hundred, so
		// buckets grow past one chunk and shrink back to none.
		target := 5 + (step/300%2)*400
		for n := 1 + rng.IntN(8); n > 0; n-- {
			ev := g.event(target)
			w.apply(&ev)
			m.apply(ev)
		}
		s := w.snapshot()
		func() {
			defer func() {
				if t.Failed() {
					t.Logf("seed %d: failed after step %d (%d instances)", seed, step, len(m.set))
				}
			}()
			verify(t, s, m)
		}()
		if rng.IntN(100) == 0 {
			old = append(old, kept{s: s, m: m.clone()})
		}
	}
	for _, k := range old {
		verify(t, k.s, k.m)
	}
	// Removing everything leaves no shared value behind.
	for id := range m.set {
		w.apply(&switchboard.Event{Kind: switchboard.EventRemoved, Instance: switchboard.Instance{ID: id}})
	}
	s := w.snapshot()
	if s.Len() != 0 || s.caps.n != 0 || s.names.n != 0 || s.types.n != 0 || s.ids.n != 0 {
		t.Fatalf("after removing everything: %d instances, %d capabilities, %d names, %d types, %d ids", s.Len(), s.caps.n, s.names.n, s.types.n, s.ids.n)
	}
	t.Logf("seed %d: %d steps, %d older versions re-checked", seed, steps, len(old))
}

// TestPickRandomIsUniformAcrossVersions removes members of a capability
// that 5,000 instances share, in random bursts, publishing a version after
// each, until a few are left. In every version (and in each kept older one
// at the end) each member must be the pick of exactly one index in [0, n):
// PickRandom draws the index uniformly, so that is what makes it fair,
// whatever the removals did. Two versions, one of a few hundred members
// and the last, are also sampled: the counts must pass a chi-square test
// at p = 1e-7.
func TestPickRandomIsUniformAcrossVersions(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	const n, cp = 5000, "all"
	w := newWriter()
	present := make([]string, n)
	for i := range n {
		ev := switchboard.Event{Kind: switchboard.EventAdded, Instance: fleetInstance(i)}
		w.apply(&ev)
		present[i] = ev.Instance.ID
	}
	type version struct {
		s   *Snapshot
		ids []string
	}
	// exactlyOnce checks that the indices of v's bucket map onto its
	// members one to one.
	exactlyOnce := func(v version) {
		t.Helper()
		b := v.s.capability(cp)
		if b == nil || b.n != len(v.ids) {
			t.Fatalf("seed %d: no bucket of %d members", seed, len(v.ids))
		}
		checkBucket(t, cp, b)
		hits := make(map[string]int, len(v.ids))
		for i := range b.n {
			hits[b.at(i).ID]++
		}
		for _, id := range v.ids {
			if hits[id] != 1 {
				t.Fatalf("seed %d: %s is the pick of %d indices of %d", seed, id, hits[id], b.n)
			}
		}
	}
	sampled := 0
	var kept []version
	s := w.snapshot()
	for len(present) > 8 {
		rng.Shuffle(len(present), func(i, j int) { present[i], present[j] = present[j], present[i] })
		k := 1 + rng.IntN(max(1, len(present)/5))
		for _, id := range present[:k] {
			w.apply(&switchboard.Event{Kind: switchboard.EventRemoved, Instance: switchboard.Instance{ID: id}})
		}
		present = present[k:]
		s = w.snapshot()
		v := version{s: s, ids: slices.Clone(present)}
		exactlyOnce(v)
		if rng.IntN(4) == 0 {
			kept = append(kept, v)
		}
		if sampled == 0 && len(present) <= 400 {
			uniform(t, s, cp, present, 1)
			sampled++
		}
	}
	uniform(t, s, cp, present, 1)
	for _, v := range kept {
		exactlyOnce(v)
	}
	t.Logf("seed %d: %d older versions re-checked", seed, len(kept))
}

// TestPickRandomOutlivesVersions picks from a version of 3,000 members,
// then from one of a single member and one of 64 made after it: each
// version's picks stay among its own members, uniformly, while a later
// version is published, and from many goroutines at once.
func TestPickRandomOutlivesVersions(t *testing.T) {
	const cp = "all"
	w, s := fleetWriter(3000)
	ids := fleetIDs(3000)
	for range 100 {
		if _, ok := s.PickRandom(cp); !ok {
			t.Fatal("no pick")
		}
	}
	for _, id := range ids[1:] {
		w.apply(&switchboard.Event{Kind: switchboard.EventRemoved, Instance: switchboard.Instance{ID: id}})
	}
	one := w.snapshot()
	for range 100 {
		if in, ok := one.PickRandom(cp); !ok || in.ID != ids[0] {
			t.Fatalf("PickRandom in a version of one member = %q, %v; want %s", in.ID, ok, ids[0])
		}
	}
	for i := 1; i < 64; i++ {
		w.apply(&switchboard.Event{Kind: switchboard.EventAdded, Instance: fleetInstance(i)})
	}
	s = w.snapshot()
	uniform(t, s, cp, ids[:64], 8)
	uniform(t, one, cp, ids[:1], 8) // the older version, still held
}

// TestPickRandomFromManyGoroutines picks from 64 goroutines at once: the
// picks, counted together, must be uniform.
func TestPickRandomFromManyGoroutines(t *testing.T) {
	_, s := fleetWriter(200)
	uniform(t, s, "all", fleetIDs(200), 64)
}

// fleetIDs returns the ids of the first n instances of the fleet.
func fleetIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fleetInstance(i).ID
	}
	return ids
}

// uniform draws PickRandom 400 times per member of cp in s, spread over
// that many goroutines, and fails if the counts' chi-square exceeds its
// 1 - 1e-7 quantile (Wilson–Hilferty).
func uniform(t *testing.T, s *Snapshot, cp string, ids []string, goroutines int) {
	t.Helper()
	const per = 400
	counts := make(map[string]int, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var left atomic.Int64 // picks still to draw, shared by the goroutines
	left.Store(int64(per * len(ids)))
	for range goroutines {
		wg.Go(func() {
			mine := make(map[string]int, len(ids))
			for left.Add(-1) >= 0 {
				in, ok := s.PickRandom(cp)
				if !ok {
					t.Error("no pick")
					return
				}
				mine[in.ID]++
			}
			mu.Lock()
			defer mu.Unlock()
			for id, k := range mine {
				counts[id] += k
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	chi := 0.0
	for _, id := range ids {
		d := float64(counts[id] - per)
		chi += d * d / per
	}
	if len(counts) != len(ids) {
		t.Fatalf("picked %d distinct members of %d", len(counts), len(ids))
	}
	df := float64(len(ids) - 1)
	if df == 0 {
		return // one member: picked every time, as the count above says
	}
	const z = 5.199 // the standard normal's 1 - 1e-7 quantile
	c := 1 - 2/(9*df) + z*math.Sqrt(2/(9*df))
	if limit := df * c * c * c; chi > limit {
		t.Fatalf("PickRandom over %d members from %d goroutines: chi-square %.1f > %.1f", len(ids), goroutines, chi, limit)
	}
	t.Logf("PickRandom over %d members from %d goroutines: chi-square %.1f (%v degrees of freedom)", len(ids), goroutines, chi, df)
}
