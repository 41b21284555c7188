package discovery

import (
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
)

// The cache does not hold switchboard.Instance values (208 bytes each). It
// holds each instance as a record of 64 bytes: what is the instance's own
// (id, address, metadata, the two times) and a pointer to its shape, what
// it shares with others (name, type, version, capabilities, components,
// TTL, the times' locations, the stale flag), interned. An Instance is put
// back together from the two when a lookup returns it, without allocating.
//
// The records are small enough to be kept twice: once on their own, which
// every index points to, and once by value in a slot of each capability
// they have (see slots), so that a pick reads the slot's record instead of
// first following a pointer to wherever the instance was allocated (a
// cache miss, and at 100,000 instances mostly a TLB miss too), and a round
// robin walks the slots in order.

// rec is an instance as the cache holds it: 64 bytes, one cache line (a
// random pick among 100,000 is one miss on its record, not two when a
// record straddles lines). Its times keep their instant and location (see
// stamp); a monotonic clock reading (which a catalog's times, read from
// storage or the wire, do not have) is not kept.
type rec struct {
	id, addr  string
	sh        *shape
	meta      map[string]string
	reg, seen int64 // RegisteredAt and LastSeen as stamps
}

// A stamp is a time as a record keeps it: its Unix nanoseconds, which
// cover 1678 to 2262 (every time a catalog stamps). The zero time is
// zeroStamp; any other time outside that range is oddStamp, and the record's
// shape keeps it exactly (rare enough not to matter for sharing).
const (
	zeroStamp = math.MinInt64
	oddStamp  = math.MinInt64 + 1
)

// stamp returns t's stamp; ok is false for oddStamp.
func stamp(t time.Time) (st int64, ok bool) {
	if t.IsZero() {
		return zeroStamp, true
	}
	sec := t.Unix()
	if sec <= math.MinInt64/int64(time.Second) || sec >= math.MaxInt64/int64(time.Second) {
		return oddStamp, false
	}
	return sec*int64(time.Second) + int64(t.Nanosecond()), true
}

// unstamp returns the time of stamp st in loc; odd is the shape's copy of
// an odd one, read only then (it lies past the cache lines a pick reads).
func unstamp(st int64, loc *time.Location, odd *time.Time) time.Time {
	switch st {
	case zeroStamp:
		return time.Time{}.In(loc)
	case oddStamp:
		return *odd
	}
	return time.Unix(0, st).In(loc)
}

// shape is what a record shares with others, interned.
type shape struct {
	name, typ, version string
	caps               []string
	comps              json.RawMessage
	ttl                time.Duration
	regLoc, seenLoc    *time.Location
	stale              bool
	// The times of a record whose stamp is oddStamp (zero otherwise), last:
	// a lookup reads the fields above, in the shape's first two cache lines.
	oddReg, oddSeen time.Time
}

// shapeKey identifies a shape: its strings, capability list and components
// are interned, so equal ones share their memory.
type shapeKey struct {
	name, typ, version string
	caps               *string
	ncaps              int
	comps              *byte
	ncomps             int
	ttl                time.Duration
	regLoc, seenLoc    *time.Location
	stale              bool
	oddReg, oddSeen    time.Time
}

func (s *shape) key() shapeKey {
	k := shapeKey{name: s.name, typ: s.typ, version: s.version, ncaps: len(s.caps), ncomps: len(s.comps),
		ttl: s.ttl, regLoc: s.regLoc, seenLoc: s.seenLoc, stale: s.stale, oddReg: s.oddReg, oddSeen: s.oddSeen}
	if len(s.caps) > 0 {
		k.caps = &s.caps[0]
	}
	if len(s.comps) > 0 {
		k.comps = &s.comps[0]
	}
	return k
}

// instance puts the instance back together.
func (r *rec) instance() switchboard.Instance {
	sh := r.sh
	return switchboard.Instance{
		ID:           r.id,
		Name:         sh.name,
		Type:         sh.typ,
		Address:      r.addr,
		Capabilities: sh.caps,
		Version:      sh.version,
		Metadata:     r.meta,
		Components:   sh.comps,
		TTL:          sh.ttl,
		RegisteredAt: unstamp(r.reg, sh.regLoc, &sh.oddReg),
		LastSeen:     unstamp(r.seen, sh.seenLoc, &sh.oddSeen),
		Stale:        sh.stale,
	}
}

// name is the instance's name (the first key of every listing's order).
func (r *rec) name() string { return r.sh.name }

// hasCapability reports whether c is one of the instance's capabilities.
func (r *rec) hasCapability(c string) bool {
	for _, x := range r.sh.caps {
		if x == c {
			return true
		}
	}
	return false
}

// cmpNameID is the order of every listing: by name, then id.
func cmpNameID(a, b *rec) int {
	if c := strings.Compare(a.sh.name, b.sh.name); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}
