package discovery

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
)

// The cache does not hold switchboard.Instance values (208 bytes each). It
// holds each instance as a record of 72 bytes: what is the instance's own
// (id, address, metadata, the two times) and a pointer to its shape, what
// it shares with others (name, type, version, capabilities, components,
// TTL, the times' locations, the stale flag), interned. An Instance is put
// back together from the two when a lookup returns it, without allocating.
//
// The records are small enough to be kept twice: once on their own, which
// the index by id, the listing by name and the name and type buckets point
// to, and once by value in the leaves of each capability bucket they are
// in, so that a pick reads one leaf, and a round robin walks the leaves in
// order, instead of following a pointer to wherever the instance was
// allocated (a cache miss, and at 100,000 instances mostly a TLB miss too).

// rec is an instance as the cache holds it. Its times keep their instant
// and location; a monotonic clock reading (which a catalog's times, read
// from storage or the wire, do not have) is not kept.
type rec struct {
	id, addr          string
	sh                *shape
	meta              map[string]string
	regSec, seenSec   int64
	regNsec, seenNsec int32
}

// shape is what a record shares with others, interned.
type shape struct {
	name, typ, version string
	caps               []string
	comps              json.RawMessage
	ttl                time.Duration
	regLoc, seenLoc    *time.Location
	stale              bool
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
}

func (s *shape) key() shapeKey {
	k := shapeKey{name: s.name, typ: s.typ, version: s.version, ncaps: len(s.caps), ncomps: len(s.comps),
		ttl: s.ttl, regLoc: s.regLoc, seenLoc: s.seenLoc, stale: s.stale}
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
		RegisteredAt: time.Unix(r.regSec, int64(r.regNsec)).In(sh.regLoc),
		LastSeen:     time.Unix(r.seenSec, int64(r.seenNsec)).In(sh.seenLoc),
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

// cmpRec is cmpNameID for records held by value.
func cmpRec(a, b rec) int { return cmpNameID(&a, &b) }
