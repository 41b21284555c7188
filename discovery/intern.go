package discovery

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"

	"github.com/switchboard-io/switchboard"
)

// interner shares the values that instances repeat — their shapes (name,
// type, version, capability list, components, TTL), metadata maps (their
// keys and values) — so a fleet of 100,000 replicas of a few services holds
// each of them once. Each shared value is counted and forgotten when its
// last instance leaves. Only the cache's goroutine uses it.
type interner struct {
	strs   map[string]*shared[string]
	caps   map[string]*shared[[]string]
	metas  map[uint64]*shared[map[string]string]
	comps  map[uint64]*shared[json.RawMessage]
	shapes map[shapeKey]*shared[*shape]
	seed   maphash.Seed
	buf    []byte
	keys   []string
}

type shared[V any] struct {
	v    V
	n    int
	next *shared[V] // another value with the same hash
}

func newInterner() *interner {
	return &interner{
		strs:   map[string]*shared[string]{},
		caps:   map[string]*shared[[]string]{},
		metas:  map[uint64]*shared[map[string]string]{},
		comps:  map[uint64]*shared[json.RawMessage]{},
		shapes: map[shapeKey]*shared[*shape]{},
		seed:   maphash.MakeSeed(),
	}
}

// acquire returns the cache's record of in, sharing what it can.
func (it *interner) acquire(in *switchboard.Instance) *rec {
	reg, _ := stamp(in.RegisteredAt)
	seen, _ := stamp(in.LastSeen)
	return &rec{id: in.ID, addr: in.Address, sh: it.shape(in), meta: it.meta(in.Metadata), reg: reg, seen: seen}
}

// shape returns the shared shape of in. Its key is built from the interned
// capability list and components where they exist (without counting a use
// of them): a shape that exists holds them.
func (it *interner) shape(in *switchboard.Instance) *shape {
	probe := shape{name: in.Name, typ: in.Type, version: in.Version, caps: in.Capabilities, comps: in.Components,
		ttl: in.TTL, regLoc: in.RegisteredAt.Location(), seenLoc: in.LastSeen.Location(), stale: in.Stale}
	if _, ok := stamp(in.RegisteredAt); !ok {
		probe.oddReg = in.RegisteredAt
	}
	if _, ok := stamp(in.LastSeen); !ok {
		probe.oddSeen = in.LastSeen
	}
	known := true
	if len(in.Capabilities) > 0 {
		if e := it.caps[string(it.capKey(in.Capabilities))]; e != nil {
			probe.caps = e.v
		} else {
			known = false
		}
	}
	if len(in.Components) > 0 {
		if e := findShared(it.comps, maphash.Bytes(it.seed, in.Components), in.Components); e != nil {
			probe.comps = e.v
		} else {
			known = false
		}
	}
	if known {
		if e := it.shapes[probe.key()]; e != nil {
			e.n++
			return e.v
		}
	}
	sh := &shape{name: it.str(in.Name), typ: it.str(in.Type), version: it.str(in.Version),
		caps: it.capList(in.Capabilities), comps: it.comp(in.Components),
		ttl: probe.ttl, regLoc: probe.regLoc, seenLoc: probe.seenLoc, stale: probe.stale,
		oddReg: probe.oddReg, oddSeen: probe.oddSeen}
	it.shapes[sh.key()] = &shared[*shape]{v: sh, n: 1}
	return sh
}

func findShared(m map[uint64]*shared[json.RawMessage], h uint64, c json.RawMessage) *shared[json.RawMessage] {
	for e := m[h]; e != nil; e = e.next {
		if bytes.Equal(e.v, c) {
			return e
		}
	}
	return nil
}

// release forgets what acquire shared for r.
func (it *interner) release(r *rec) {
	if len(r.meta) > 0 {
		h := maphash.Bytes(it.seed, it.metaKey(r.meta))
		m := r.meta
		if e := drop(it.metas, h, func(v map[string]string) bool { return maps.Equal(v, m) }); e != nil {
			for k, x := range e.v {
				unref(it.strs, k)
				unref(it.strs, x)
			}
		}
	}
	k := r.sh.key()
	e := it.shapes[k]
	if e == nil {
		return
	}
	if e.n--; e.n > 0 {
		return
	}
	delete(it.shapes, k)
	sh := e.v
	unref(it.strs, sh.name)
	unref(it.strs, sh.typ)
	unref(it.strs, sh.version)
	if len(sh.caps) > 0 {
		ck := it.capKey(sh.caps)
		if e := it.caps[string(ck)]; e != nil {
			if e.n--; e.n == 0 {
				delete(it.caps, string(ck))
				for _, c := range e.v {
					unref(it.strs, c)
				}
			}
		}
	}
	if len(sh.comps) > 0 {
		c := sh.comps
		drop(it.comps, maphash.Bytes(it.seed, c), func(v json.RawMessage) bool { return bytes.Equal(v, c) })
	}
}

func unref[V any](m map[string]*shared[V], k string) {
	if k == "" {
		return
	}
	if e := m[k]; e != nil {
		if e.n--; e.n == 0 {
			delete(m, k)
		}
	}
}

func (it *interner) str(s string) string {
	if s == "" {
		return ""
	}
	if e := it.strs[s]; e != nil {
		e.n++
		return e.v
	}
	it.strs[s] = &shared[string]{v: s, n: 1}
	return s
}

// capKey joins capabilities with NUL, which no capability contains.
func (it *interner) capKey(caps []string) []byte {
	it.buf = it.buf[:0]
	for _, c := range caps {
		it.buf = append(it.buf, c...)
		it.buf = append(it.buf, 0)
	}
	return it.buf
}

func (it *interner) capList(caps []string) []string {
	if len(caps) == 0 {
		return caps
	}
	if e := it.caps[string(it.capKey(caps))]; e != nil {
		e.n++
		return e.v
	}
	v := make([]string, len(caps))
	for i, c := range caps {
		v[i] = it.str(c) // held for as long as the list is shared
	}
	it.caps[string(it.buf)] = &shared[[]string]{v: v, n: 1}
	return v
}

// metaKey is the metadata as sorted key NUL value NUL pairs (validated
// metadata has no NUL).
func (it *interner) metaKey(m map[string]string) []byte {
	it.keys = it.keys[:0]
	for k := range m {
		it.keys = append(it.keys, k)
	}
	slices.Sort(it.keys)
	it.buf = it.buf[:0]
	for _, k := range it.keys {
		it.buf = append(it.buf, k...)
		it.buf = append(it.buf, 0)
		it.buf = append(it.buf, m[k]...)
		it.buf = append(it.buf, 0)
	}
	return it.buf
}

// Metadata maps and component documents are found by a hash of their
// content, so a map held by one instance only is not stored twice (once as
// a key); equal hashes are told apart by content.
func (it *interner) meta(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	h := maphash.Bytes(it.seed, it.metaKey(m))
	for e := it.metas[h]; e != nil; e = e.next {
		if maps.Equal(e.v, m) {
			e.n++
			return e.v
		}
	}
	v := make(map[string]string, len(m))
	for k, x := range m {
		v[it.str(k)] = it.str(x)
	}
	it.metas[h] = &shared[map[string]string]{v: v, n: 1, next: it.metas[h]}
	return v
}

func (it *interner) comp(c json.RawMessage) json.RawMessage {
	if len(c) == 0 {
		return c
	}
	h := maphash.Bytes(it.seed, c)
	if e := findShared(it.comps, h, c); e != nil {
		e.n++
		return e.v
	}
	v := slices.Clone(c)
	it.comps[h] = &shared[json.RawMessage]{v: v, n: 1, next: it.comps[h]}
	return v
}

// drop forgets one use of v in the chain at m[h]; it returns v's entry when
// that was the last use.
func drop[V any](m map[uint64]*shared[V], h uint64, same func(V) bool) *shared[V] {
	var prev *shared[V]
	for e := m[h]; e != nil; prev, e = e, e.next {
		if !same(e.v) {
			continue
		}
		if e.n--; e.n > 0 {
			return nil
		}
		switch {
		case prev != nil:
			prev.next = e.next
		case e.next != nil:
			m[h] = e.next
		default:
			delete(m, h)
		}
		return e
	}
	return nil
}
