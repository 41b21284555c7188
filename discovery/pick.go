package discovery

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-io/switchboard"
)

// Policy is how a pick chooses among the serving instances of a name or a
// capability.
type Policy uint8

// Policies.
const (
	// RoundRobin takes each serving instance in turn, whatever its weight.
	RoundRobin Policy = iota
	// Random takes a serving instance uniformly at random, whatever its
	// weight.
	Random
	// WeightedRoundRobin is nginx's smooth weighted round robin: each pick
	// adds every instance's weight to its current weight, takes the
	// instance whose current weight is the largest, and takes the total
	// weight off it. In a set that does not change, any run of
	// total/g picks (g: the weights' greatest common divisor) picks each
	// instance exactly weight/g times, spread out rather than in a row.
	WeightedRoundRobin
	// WeightedRandom takes a serving instance at random with probability
	// its weight over the total weight.
	WeightedRandom
)

func (p Policy) String() string {
	switch p {
	case RoundRobin:
		return "round_robin"
	case Random:
		return "random"
	case WeightedRoundRobin:
		return "weighted_round_robin"
	case WeightedRandom:
		return "weighted_random"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// ZonePreference makes picks prefer the instances of the caller's zone
// (Instance.Zone): they pick among the serving instances of Zone when
// there are enough of them, and among all the serving instances
// otherwise. Enough is at least MinEligible of them, or (when MinShare is
// set) at least MinShare of the total weight; with both zero,
// DefaultZoneMin of them. The zero value prefers nothing.
type ZonePreference struct {
	// Zone is the caller's zone; empty: no preference.
	Zone string
	// MinEligible is how many serving instances the zone needs.
	MinEligible int
	// MinShare is the share (0 to 1) of the serving instances' total
	// weight that the zone's may hold instead.
	MinShare float64
}

// DefaultZoneMin is how many serving instances a caller's zone needs to be
// preferred when the caller does not say, here and in the pool and the
// resolver: with two, a zone's single instance does not take all of its
// callers' load.
const DefaultZoneMin = 2

// PreferZone prefers the instances of zone while at least minEligible of
// them are serving (DefaultZoneMin when minEligible is 0).
func PreferZone(zone string, minEligible int) ZonePreference {
	return ZonePreference{Zone: zone, MinEligible: minEligible}
}

// PreferZoneShare prefers the instances of zone while they hold at least
// minShare (0 to 1) of the serving instances' total weight.
func PreferZoneShare(zone string, minShare float64) ZonePreference {
	return ZonePreference{Zone: zone, MinShare: minShare}
}

// local reports whether the zone's set l is enough, of all.
func (z *ZonePreference) local(l, all *set) bool {
	least := z.MinEligible
	if least == 0 && z.MinShare == 0 {
		least = DefaultZoneMin
	}
	return least > 0 && l.n >= least || z.MinShare > 0 && float64(l.total) >= z.MinShare*float64(all.total)
}

// PickOptions choose how a Picker picks.
type PickOptions struct {
	Policy Policy
	Zone   ZonePreference
}

// Picker picks instances for calls, one per Pick, among the serving
// instances (Instance.Serving: not stale, not draining, check not
// critical) of one capability or one name, from the cache's newest
// version. It is what a balancer is to grpc-go and go-kit users: made once
// per target, shared by every goroutine, and allocation-free per pick.
type Picker struct {
	c    *Cache
	q    switchboard.Query
	opts PickOptions
}

// NewPicker returns a picker among the instances of q's capability or
// name (exactly one of the two, nothing else). The policy and the zone
// preference are checked here: picks cannot fail but for want of an
// instance.
func (c *Cache) NewPicker(q switchboard.Query, opts PickOptions) (*Picker, error) {
	bad := func(field, value, reason string) (*Picker, error) {
		return nil, fmt.Errorf("discovery: %w", &switchboard.FieldError{Field: field, Value: value, Reason: reason})
	}
	switch {
	case (q.Capability == "") == (q.Name == "") || q.Type != "" || q.All:
		return bad("query", fmt.Sprintf("%+v", q), "a picker picks among one capability or one name: set Capability or Name, nothing else")
	case opts.Policy > WeightedRandom:
		return bad("policy", opts.Policy.String(), "want RoundRobin, Random, WeightedRoundRobin or WeightedRandom")
	case opts.Zone.MinEligible < 0:
		return bad("zone preference min eligible", strconv.Itoa(opts.Zone.MinEligible), "must not be negative")
	case !(opts.Zone.MinShare >= 0 && opts.Zone.MinShare <= 1):
		return bad("zone preference min share", strconv.FormatFloat(opts.Zone.MinShare, 'g', -1, 64), "must be from 0 to 1")
	}
	return &Picker{c: c, q: q, opts: opts}, nil
}

// Pick returns a serving instance from the cache's newest version; false
// when there is none.
func (p *Picker) Pick() (switchboard.Instance, bool) { return p.PickFrom(p.c.snap.Load()) }

// PickFrom picks from version s (one that several lookups share).
func (p *Picker) PickFrom(s *Snapshot) (switchboard.Instance, bool) {
	var b *bucket
	if p.q.Capability != "" {
		b = s.capability(p.q.Capability)
	} else {
		b, _ = s.names.get(p.q.Name)
	}
	return b.pickOne(p.opts.Policy, &p.opts.Zone)
}

// pickState is what the picks of a name or a capability share across its
// versions: the round-robin cursor, and the table whose smooth weighted
// round robin state is current (a new version's table takes it over).
type pickState struct {
	rr atomic.Uint64
	mu sync.Mutex // guards t and the smooth state of every table
	t  *table
}

var noZone ZonePreference

// pickOne returns a copy of b.pick's instance; false when none serves.
func (b *bucket) pickOne(policy Policy, z *ZonePreference) (switchboard.Instance, bool) {
	if in := b.pick(policy, z); in != nil {
		return *in, true
	}
	return switchboard.Instance{}, false
}

// pick picks a serving member of b by policy, preferring zone z; nil when
// none serves.
func (b *bucket) pick(policy Policy, z *ZonePreference) *switchboard.Instance {
	if b.serving() == 0 {
		return nil
	}
	if b.off == 0 && z.Zone == "" {
		// Every member serves and every member is eligible: the bucket
		// itself, no table, for the unweighted policies.
		switch policy {
		case RoundRobin:
			return b.at(int((b.picks.rr.Add(1) - 1) % uint64(b.n)))
		case Random:
			return b.at(rand.IntN(b.n))
		}
	}
	t := b.table()
	s := &t.all
	if z.Zone != "" {
		if l := t.zone(z.Zone); l != nil && z.local(l, s) {
			s = l
		}
	}
	var p *switchboard.Instance
	switch policy {
	case RoundRobin:
		p = s.at(t, int((b.picks.rr.Add(1)-1)%uint64(s.n)))
	case Random:
		p = s.at(t, rand.IntN(s.n))
	case WeightedRandom:
		p = s.weighted(t, rand.Int64N(s.total))
	default:
		p = b.picks.smooth(t, s)
	}
	return p
}

// table is one version's serving members of a name or a capability,
// arranged for picks: by weight (heaviest first), then zone, then name and
// id. Members of one weight form a class, and members of one weight and
// zone a run of the list; a set is the classes of every zone or of one.
// It is built on the first pick that needs it (O(k) for k members), once
// per version.
type table struct {
	list  []*switchboard.Instance
	all   set
	zones []set // by zone; none for the members without a zone
}

// set is the serving members of every zone, or of one, as classes of
// their weight.
type set struct {
	zone    string
	classes []class // heaviest first
	st      []smooth
	n       int   // members
	total   int64 // their weights
}

// class is a run of the table's list: n members of weight w, from lo.
type class struct {
	lo, n int
	w     int64
	cum   int64 // the weights of this class and the heavier ones of its set
}

// smooth is a class's state in smooth weighted round robin. Its members are
// taken in order: those before next were picked in this round, their
// current weight is cur - total; the others' is cur.
type smooth struct {
	cur  int64
	next int
}

// table returns b's table, building it on first use.
func (b *bucket) table() *table {
	if t := b.tab.Load(); t != nil {
		return t
	}
	t := buildTable(b)
	if !b.tab.CompareAndSwap(nil, t) {
		return b.tab.Load()
	}
	return t
}

func buildTable(b *bucket) *table {
	// The runs of one weight and zone, and each member's, in one pass.
	type key struct {
		w    int64
		zone string
	}
	type run struct {
		key
		lo, n int
	}
	var runs []run
	index := map[key]int{}
	members := make([]*switchboard.Instance, 0, b.serving())
	of := make([]int32, 0, b.serving())
	last := -1
	b.each(func(p *switchboard.Instance) bool {
		if !p.Serving() {
			return true
		}
		k := key{int64(p.TrafficWeight()), p.Zone}
		if last < 0 || runs[last].key != k {
			r, ok := index[k]
			if !ok {
				r = len(runs)
				runs = append(runs, run{key: k})
				index[k] = r
			}
			last = r
		}
		runs[last].n++
		members = append(members, p)
		of = append(of, int32(last))
		return true
	})
	// The runs by weight (heaviest first), then zone; each run's members
	// as they came, by name then id.
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(runs[j].w, runs[i].w), strings.Compare(runs[i].zone, runs[j].zone))
	})
	lo := 0
	for _, r := range order {
		runs[r].lo = lo
		lo += runs[r].n
	}
	t := &table{list: make([]*switchboard.Instance, len(members))}
	fill := make([]int, len(runs))
	for i, p := range members {
		r := of[i]
		t.list[runs[r].lo+fill[r]] = p
		fill[r]++
	}
	for _, r := range order {
		c := class{lo: runs[r].lo, n: runs[r].n, w: runs[r].w}
		if k := len(t.all.classes) - 1; k >= 0 && t.all.classes[k].w == c.w {
			t.all.classes[k].n += c.n
		} else {
			t.all.classes = append(t.all.classes, c)
		}
	}
	t.all.finish()
	// Each zone's runs, by zone and, within one, heaviest first.
	slices.SortStableFunc(order, func(i, j int) int { return strings.Compare(runs[i].zone, runs[j].zone) })
	for _, r := range order {
		if runs[r].zone == "" {
			continue
		}
		if k := len(t.zones) - 1; k < 0 || t.zones[k].zone != runs[r].zone {
			t.zones = append(t.zones, set{zone: runs[r].zone})
		}
		z := &t.zones[len(t.zones)-1]
		z.classes = append(z.classes, class{lo: runs[r].lo, n: runs[r].n, w: runs[r].w})
	}
	for i := range t.zones {
		t.zones[i].finish()
	}
	return t
}

// finish counts the set's members and weights, and gives it its smooth
// state.
func (s *set) finish() {
	for i := range s.classes {
		c := &s.classes[i]
		s.n += c.n
		s.total += int64(c.n) * c.w
		c.cum = s.total
	}
	s.st = make([]smooth, len(s.classes))
}

// zone returns the set of zone z, nil when no serving member is in it.
func (t *table) zone(z string) *set {
	lo, hi := 0, len(t.zones)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.zones[m].zone < z {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(t.zones) && t.zones[lo].zone == z {
		return &t.zones[lo]
	}
	return nil
}

// at returns the set's member i, 0 ≤ i < n.
func (s *set) at(t *table, i int) *switchboard.Instance {
	if s == &t.all {
		return t.list[i]
	}
	k := 0
	for ; k < len(s.classes)-1 && i >= s.classes[k].n; k++ {
		i -= s.classes[k].n
	}
	return t.list[s.classes[k].lo+i]
}

// weighted returns the member that r, 0 ≤ r < total, falls on when each
// member covers as much of [0, total) as its weight.
func (s *set) weighted(t *table, r int64) *switchboard.Instance {
	lo, hi := 0, len(s.classes)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.classes[m].cum > r {
			hi = m
		} else {
			lo = m + 1
		}
	}
	c := &s.classes[lo]
	from := c.cum - int64(c.n)*c.w
	return t.list[c.lo+int((r-from)/c.w)]
}

// smooth takes set s's next member in smooth weighted round robin. The
// members of a class have the same weight, so of them the first not yet
// picked in this round has the largest current weight; each pick compares
// one member per class, and the heavier class wins a tie (it comes first
// in the list, as the first of equals wins in nginx).
func (ps *pickState) smooth(t *table, s *set) *switchboard.Instance {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.t != t {
		if ps.t != nil {
			t.carry(ps.t)
		}
		ps.t = t
	}
	best := 0
	for i := range s.st {
		s.st[i].cur += s.classes[i].w
		if s.st[i].cur > s.st[best].cur {
			best = i
		}
	}
	c, st := &s.classes[best], &s.st[best]
	p := t.list[c.lo+st.next]
	if st.next++; st.next == c.n {
		st.next, st.cur = 0, st.cur-s.total
	}
	return p
}

// carry gives t the smooth state of old, the table picked from before: a
// class of a weight that old's set had takes over its state, so a new
// version of an unchanged set (an instance's address or metadata
// changed) continues the round where it was, and a changed set does not
// start over from its heaviest class.
func (t *table) carry(old *table) {
	t.all.carry(&old.all)
	for i := range t.zones {
		if o := old.zone(t.zones[i].zone); o != nil {
			t.zones[i].carry(o)
		} else {
			clear(t.zones[i].st)
		}
	}
}

func (s *set) carry(o *set) {
	j := 0
	for i := range s.classes {
		w := s.classes[i].w
		for j < len(o.classes) && o.classes[j].w > w {
			j++
		}
		if j < len(o.classes) && o.classes[j].w == w {
			st := o.st[j]
			s.st[i] = smooth{cur: max(-s.total, min(st.cur, s.total)), next: st.next % s.classes[i].n}
		} else {
			s.st[i] = smooth{}
		}
	}
}
