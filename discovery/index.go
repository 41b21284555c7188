package discovery

import (
	"hash/maphash"
	"slices"
)

// pmap is one version of a persistent map from strings: its entries are
// spread over 256 shards by a hash of their key, each shard sorted by hash,
// then key. A change copies the array of shards and the one shard it
// touches, never the whole map, so every published version stays intact
// for its readers. The zero value is empty.
type pmap[V any] struct {
	shards *[nShards][]entry[V]
	n      int
}

const (
	shardBits = 8
	nShards   = 1 << shardBits
)

type entry[V any] struct {
	h uint64
	k string
	v V
}

var seed = maphash.MakeSeed()

func hash(k string) uint64 { return maphash.String(seed, k) }

// search returns where key k (whose hash is h) is or would go in shard s.
func search[V any](s []entry[V], h uint64, k string) (int, bool) {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e := &s[m]; e.h < h || e.h == h && e.k < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(s) && s[lo].h == h && s[lo].k == k
}

func (m *pmap[V]) get(k string) (v V, ok bool) {
	if m.shards == nil {
		return v, false
	}
	h := hash(k)
	s := m.shards[h>>(64-shardBits)]
	i, ok := search(s, h, k)
	if !ok {
		return v, false
	}
	return s[i].v, true
}

// each calls fn for every entry, in no particular order.
func (m *pmap[V]) each(fn func(k string, v V)) {
	if m.shards == nil {
		return
	}
	for _, s := range m.shards {
		for _, e := range s {
			fn(e.k, e.v)
		}
	}
}

// wmap is the writer's working version of a pmap. What it copied since the
// last publish (the array of shards, the shards marked in owned) no reader
// has seen, so it changes them in place: a burst of changes (a snapshot of
// the whole catalog) copies each shard once, not once per change.
type wmap[V any] struct {
	pmap[V]
	top   bool
	owned [nShards / 64]uint64
}

// shard returns shard j of the working version, owned.
func (w *wmap[V]) shard(j uint64) *[]entry[V] {
	if !w.top {
		a := new([nShards][]entry[V])
		if w.shards != nil {
			*a = *w.shards
		}
		w.shards, w.top = a, true
	}
	if w.owned[j/64]&(1<<(j%64)) == 0 {
		s := w.shards[j]
		w.shards[j] = append(make([]entry[V], 0, len(s)+1), s...)
		w.owned[j/64] |= 1 << (j % 64)
	}
	return &w.shards[j]
}

func (w *wmap[V]) set(k string, v V) {
	h := hash(k)
	s := w.shard(h >> (64 - shardBits))
	i, ok := search(*s, h, k)
	if ok {
		(*s)[i].v = v
		return
	}
	*s = slices.Insert(*s, i, entry[V]{h, k, v})
	w.n++
}

func (w *wmap[V]) del(k string) {
	if _, ok := w.get(k); !ok {
		return
	}
	h := hash(k)
	s := w.shard(h >> (64 - shardBits))
	i, _ := search(*s, h, k)
	*s = slices.Delete(*s, i, i+1)
	w.n--
}

// publish returns the working version for readers; what the writer
// changes next, it copies first.
func (w *wmap[V]) publish() pmap[V] {
	w.top, w.owned = false, [nShards / 64]uint64{}
	return w.pmap
}
