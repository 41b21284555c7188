package discovery

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"

	"github.com/switchboard-io/switchboard"
)

// interner shares the values that instances repeat — names, types,
// versions, capability lists, metadata maps, component documents — so a
// fleet of 100,000 replicas of a few services holds each of them once. Each
// shared value is counted and forgotten when its last instance leaves.
// Only the cache's goroutine uses it.
type interner struct {
	strs  map[string]*shared[string]
	caps  map[string]*shared[[]string]
	metas map[uint64]*shared[map[string]string]
	comps map[uint64]*shared[json.RawMessage]
	seed  maphash.Seed
	buf   []byte
	keys  []string
}

type shared[V any] struct {
	v    V
	n    int
	next *shared[V] // another value with the same hash
}

func newInterner() *interner {
	return &interner{
		strs:  map[string]*shared[string]{},
		caps:  map[string]*shared[[]string]{},
		metas: map[uint64]*shared[map[string]string]{},
		comps: map[uint64]*shared[json.RawMessage]{},
		seed:  maphash.MakeSeed(),
	}
}

// acquire returns the cache's own copy of in, sharing what it can.
func (it *interner) acquire(in *switchboard.Instance) *switchboard.Instance {
	p := new(switchboard.Instance)
	*p = *in
	p.Name = it.str(in.Name)
	p.Type = it.str(in.Type)
	p.Version = it.str(in.Version)
	p.Capabilities = it.capList(in.Capabilities)
	p.Metadata = it.meta(in.Metadata)
	p.Components = it.comp(in.Components)
	return p
}

// release forgets what acquire shared for p.
func (it *interner) release(p *switchboard.Instance) {
	unref(it.strs, p.Name)
	unref(it.strs, p.Type)
	unref(it.strs, p.Version)
	if len(p.Capabilities) > 0 {
		k := it.capKey(p.Capabilities)
		if e := it.caps[string(k)]; e != nil {
			if e.n--; e.n == 0 {
				delete(it.caps, string(k))
				for _, c := range e.v {
					unref(it.strs, c)
				}
			}
		}
	}
	if len(p.Metadata) > 0 {
		h := maphash.Bytes(it.seed, it.metaKey(p.Metadata))
		m := p.Metadata
		if e := drop(it.metas, h, func(v map[string]string) bool { return maps.Equal(v, m) }); e != nil {
			for k, x := range e.v {
				unref(it.strs, k)
				unref(it.strs, x)
			}
		}
	}
	if len(p.Components) > 0 {
		c := p.Components
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
	for e := it.comps[h]; e != nil; e = e.next {
		if bytes.Equal(e.v, c) {
			e.n++
			return e.v
		}
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
