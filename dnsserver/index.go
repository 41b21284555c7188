package dnsserver

import (
	"sync"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
)

// index is what the cache's own indexes lack for DNS: the capabilities and
// types by the label they answer to (the cache knows them as registered,
// query_execution, and a query asks for query-execution), and the ids that
// have capital letters by their lower case (a query may come in any case).
// It holds the distinct capabilities and types, and the ids with capitals,
// not the instances: those are read from the cache's snapshot, which the
// index keeps beside it so that both are of the same version.
type index struct {
	mu    sync.RWMutex
	snap  *discovery.Snapshot
	caps  map[string]map[string]int // label → capability → instances having it
	types map[string]map[string]int // label → type → instances of it
	ids   map[string]map[string]int // lower-case id → ids with capitals
}

// follow builds the index of cache's current version and keeps it current;
// stop stops following.
func follow(cache *discovery.Cache) (*index, func()) {
	x := &index{caps: map[string]map[string]int{}, types: map[string]map[string]int{}, ids: map[string]map[string]int{}}
	// The first version is indexed before any change is applied: the
	// cache's goroutine waits on the lock meanwhile.
	x.mu.Lock()
	defer x.mu.Unlock()
	snap, stop := cache.SubscribeChanges(x.update)
	for in := range snap.Instances(switchboard.Query{}) {
		x.add(&in, 1)
	}
	x.snap = snap
	return x, stop
}

// update applies one published version's changes (from the cache's
// goroutine: a few map operations per change).
func (x *index) update(s *discovery.Snapshot, changes []discovery.Change) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range changes {
		if c.Old != nil {
			x.add(c.Old, -1)
		}
		if c.New != nil {
			x.add(c.New, 1)
		}
	}
	x.snap = s
}

// add counts in's capabilities, type and id d times (1 or -1).
func (x *index) add(in *switchboard.Instance, d int) {
	for i, c := range in.Capabilities {
		if !contains(in.Capabilities[:i], c) {
			count(x.caps, label(c), c, d)
		}
	}
	count(x.types, label(in.Type), in.Type, d)
	if lower := lowerASCII(in.ID); lower != in.ID {
		count(x.ids, lower, in.ID, d)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func count(m map[string]map[string]int, key, value string, d int) {
	vs := m[key]
	if vs == nil {
		if d < 0 {
			return
		}
		vs = map[string]int{}
		m[key] = vs
	}
	if vs[value] += d; vs[value] <= 0 {
		delete(vs, value)
		if len(vs) == 0 {
			delete(m, key)
		}
	}
}

// label is the DNS label a capability or type answers to: sanitised as an
// instance name is. Capabilities and types begin with a letter or digit,
// so none sanitises to nothing; if one did, it answers to no label.
func label(s string) string {
	l, err := switchboard.SanitizeName(s)
	if err != nil {
		return ""
	}
	return l
}

// lookup returns the snapshot and the values (capabilities, types or ids)
// that key stands for in m, appended to buf, of one version.
func (x *index) lookup(m func(*index) map[string]map[string]int, key string, buf []string) (*discovery.Snapshot, []string) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for v := range m(x)[key] {
		buf = append(buf, v)
	}
	return x.snap, buf
}

// snapshot returns the version the index is of.
func (x *index) snapshot() *discovery.Snapshot {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.snap
}
