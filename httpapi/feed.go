package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-io/switchboard"
)

// feed is the server's one mirror of the catalog: a single Watch of every
// instance (stale ones included), the current state built from it, and a
// bounded history of its events numbered in order. Every SSE subscriber
// reads that history at its own pace with its own cursor, so a slow
// subscriber holds no queue of its own: when it falls behind the oldest
// entry it is sent a fresh snapshot instead.
//
// The history is bounded twice: in entries (limit) and in the bytes of the
// instances its entries hold (maxBytes), so one client re-registering a
// large instance over and over cannot make the server keep thousands of
// copies of it.
type feed struct {
	log      *slog.Logger
	epoch    string // distinguishes this feed's event ids from another server's or run's
	limit    int    // entries of history kept
	maxBytes int64  // bytes of history kept (entry sizes summed)
	observe  func(in *switchboard.Instance)

	mu           sync.RWMutex // readers: every SSE subscriber at once on each change
	state        map[string]*state
	stateBytes   int64             // the sizes of every state in state
	hashes       map[string]string // id -> secret hash, from the reserved metadata key
	owned        map[string]int    // credential tag -> its rows not stale
	ring         []entry           // ring[i] has seq first+i
	ringBytes    int64             // the sizes of every entry in ring
	first        int64
	head         int64  // seq of the newest entry; 0 before any
	pos          string // the catalog position the mirror is at (Event.Position; "" when the catalog gives none)
	ready        bool   // the initial snapshot is in
	healthy      bool
	healthySince time.Time     // when healthy last became true by a sync (zero: never synced)
	lastErr      error         // why the mirror cannot read the catalog (nil once it can)
	wake         chan struct{} // closed and replaced when entries are appended
	readyCh      chan struct{}
	done         chan struct{}
}

// state is one instance as the feed knows it, immutable once made: entries
// and snapshots share it. JSON is encoded once, not once per subscriber.
type state struct {
	inst switchboard.Instance // secret hash stripped
	json []byte
	// owner is the tag of the credential that registered the row, which
	// its secret's hash carries ("" for none).
	owner string
}

// entry is one event of the feed. For added/updated/removed, prev and next
// are the instance before and after (nil: absent); removed events carry the
// instance the catalog reported in next's place via gone.
type entry struct {
	seq    int64
	kind   switchboard.EventKind
	reason switchboard.Reason
	prev   *state
	next   *state
	gone   *state
	errMsg string
	pos    string // the catalog position once this entry is read (feed.pos)
	size   int64  // e.bytes(), counted once
}

func newFeed(log *slog.Logger, limit int, maxBytes int64, observe func(*switchboard.Instance)) *feed {
	var b [4]byte
	rand.Read(b[:])
	return &feed{
		log: log, epoch: hex.EncodeToString(b[:]), limit: limit, maxBytes: maxBytes, observe: observe,
		state: map[string]*state{}, hashes: map[string]string{}, owned: map[string]int{}, first: 1, healthy: true,
		wake: make(chan struct{}), readyCh: make(chan struct{}), done: make(chan struct{}),
	}
}

// run reads the catalog watch until ctx ends or the watch closes.
func (f *feed) run(ctx context.Context, cat switchboard.Catalog) {
	defer close(f.done)
	ch, err := cat.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		f.log.Error("server mirror: watch failed", "err", err)
		f.mu.Lock()
		f.healthy, f.lastErr = false, err
		f.mu.Unlock()
		return
	}
	for ev := range ch {
		f.apply(ev)
	}
	if ctx.Err() == nil {
		// The catalog ended the watch (it was closed under the server):
		// nothing will update the mirror again. Say so, as for an
		// unreachable catalog, to the subscribers and in /v1/info.
		f.log.Error("server mirror: the catalog's watch has ended")
		f.apply(switchboard.Event{Kind: switchboard.EventError, Err: errMirrorStopped})
	}
}

var errMirrorStopped = errors.New("the server's catalog watch has stopped")

// makeState returns in's state, without the reserved metadata key (the
// owner its hash carries kept), and the secret's hash the key held.
func makeState(in switchboard.Instance) (st *state, hash string) {
	hash = in.Metadata[secretKey]
	if hash != "" {
		in = in.Clone()
		delete(in.Metadata, secretKey)
	}
	b, err := json.Marshal(in)
	if err != nil {
		b = []byte(`{}`)
	}
	return &state{inst: in, json: b, owner: secretTag(hash)}, hash
}

// own moves a row, as counted by owned, from what it was (prev) to what
// it is (next, nil when gone): a row counts to its owner while it is not
// stale (f.mu held).
func (f *feed) own(prev, next *state) {
	if o := prev.countsTo(); o != "" {
		if f.owned[o]--; f.owned[o] <= 0 {
			delete(f.owned, o)
		}
	}
	if o := next.countsTo(); o != "" {
		f.owned[o]++
	}
}

// countsTo is the owner st counts to in owned: "" when it is nil, stale,
// or has none.
func (st *state) countsTo() string {
	if st == nil || st.inst.Stale {
		return ""
	}
	return st.owner
}

// ownedBy returns how many rows not stale the mirror holds that tag's
// credential registered.
func (f *feed) ownedBy(tag string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.owned[tag]
}

func (f *feed) apply(ev switchboard.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.Position != "" {
		f.pos = ev.Position
	}
	e := entry{kind: ev.Kind, reason: ev.Reason, pos: f.pos}
	switch ev.Kind {
	case switchboard.EventAdded, switchboard.EventUpdated:
		st, hash := makeState(ev.Instance)
		id := st.inst.ID
		e.prev, e.next = f.state[id], st
		f.stateBytes += st.bytes() - e.prev.bytes()
		f.own(e.prev, st)
		f.state[id] = st
		if hash != "" {
			f.hashes[id] = hash
		} else {
			delete(f.hashes, id)
		}
		if f.observe != nil && f.ready {
			f.observe(&st.inst)
		}
	case switchboard.EventRemoved:
		st, _ := makeState(ev.Instance)
		id := st.inst.ID
		e.prev, e.gone = f.state[id], st
		f.stateBytes -= e.prev.bytes()
		f.own(e.prev, nil)
		delete(f.state, id)
		delete(f.hashes, id)
	case switchboard.EventSynced:
		if !f.healthy || f.healthySince.IsZero() {
			f.healthySince = time.Now()
		}
		f.healthy, f.lastErr = true, nil
		if !f.ready {
			f.ready = true
			close(f.readyCh)
			return
		}
	case switchboard.EventError:
		f.healthy = false
		if ev.Err != nil {
			f.lastErr = ev.Err
		}
		e.errMsg = f.errText()
	default:
		return
	}
	if !f.ready {
		return // the initial snapshot only builds the state
	}
	f.head++
	e.seq = f.head
	e.size = e.bytes()
	f.ring = append(f.ring, e)
	f.ringBytes += e.size
	// The newest entry always stays, whatever its size: a subscriber
	// that is up to date must be able to read it.
	for len(f.ring) > 1 && (len(f.ring) > f.limit || f.ringBytes > f.maxBytes) {
		f.ringBytes -= f.ring[0].size
		f.ring[0] = entry{}
		f.ring = f.ring[1:]
		f.first++
	}
	if len(f.ring) == 1 {
		f.first = e.seq
	}
	close(f.wake)
	f.wake = make(chan struct{})
}

// historyBytes returns the bytes the history's entries hold (their sizes
// summed) and how many entries it has.
func (f *feed) historyBytes() (int64, int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ringBytes, len(f.ring)
}

// entryOverhead is what an entry costs beside the instances it points to:
// the entry itself and its slot in the ring, rounded up.
const entryOverhead = 128

// bytes is what e keeps alive, counted from above: each state it points to
// whole (prev included, though the entry before usually holds it too), so
// the history's real size is never more than its count.
func (e *entry) bytes() int64 {
	return entryOverhead + e.prev.bytes() + e.next.bytes() + e.gone.bytes() + int64(len(e.errMsg))
}

// stateOverhead is what a state costs beside its strings and documents:
// the Instance's fields, the slice and map headers, the JSON's header.
const stateOverhead = 512

// bytes is the memory st holds: its JSON, and the instance's strings,
// capabilities, metadata and components (0 for nil).
func (st *state) bytes() int64 {
	if st == nil {
		return 0
	}
	in := &st.inst
	n := stateOverhead + len(st.json) + len(st.owner) + len(in.ID) + len(in.Name) + len(in.Type) + len(in.Address) +
		len(in.Version) + len(in.Components)
	for _, c := range in.Capabilities {
		n += 16 + len(c)
	}
	for k, v := range in.Metadata {
		n += 48 + len(k) + len(v)
	}
	return int64(n)
}

// eventID is the SSE id of seq: the feed's epoch and the sequence number,
// by which this server resumes a stream from its history, then, after
// "~", the catalog position the mirror was at (when the catalog gives
// positions), by which any server of the catalog resumes it
// (switchboard.WatchResumer) when the history does not hold it: after a
// restart, or behind a load balancer.
func (f *feed) eventID(seq int64) string {
	f.mu.RLock()
	pos := f.pos
	if seq != f.head && seq >= f.first && seq < f.first+int64(len(f.ring)) {
		pos = f.ring[seq-f.first].pos
	}
	f.mu.RUnlock()
	id := f.epoch + "-" + strconv.FormatInt(seq, 10)
	if pos != "" {
		id += "~" + pos
	}
	return id
}

// parseEventID returns the seq of an id issued by this feed (ok false for
// another server's, another run's, or a malformed id) and, from any
// server's id, the catalog position it carries ("" when none).
func (f *feed) parseEventID(id string) (seq int64, ok bool, pos string) {
	id, pos, _ = strings.Cut(id, "~")
	ep, s, found := strings.Cut(id, "-")
	if !found || ep != f.epoch {
		return 0, false, pos
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 0 {
		return 0, false, pos
	}
	return seq, true, pos
}

// size returns how many instances the mirror holds, stale ones included,
// and the bytes they hold (their sizes summed).
func (f *feed) size() (int, int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.state), f.stateBytes
}

// counts returns the mirrored instances, active and stale.
func (f *feed) counts() (active, stale int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, st := range f.state {
		if st.inst.Stale {
			stale++
		} else {
			active++
		}
	}
	return active, stale
}

// maxTTL is the longest TTL of the mirrored rows (def for a row without
// one), def when there are none.
func (f *feed) maxTTL(def time.Duration) time.Duration {
	f.mu.RLock()
	defer f.mu.RUnlock()
	longest := def
	for _, st := range f.state {
		longest = max(longest, cmp.Or(st.inst.TTL, def))
	}
	return longest
}

// reachableFor is how long the catalog has been reachable to the feed:
// since its last sync after an error (or its first), zero while unhealthy.
func (f *feed) reachableFor() time.Duration {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.healthy || f.healthySince.IsZero() {
		return 0
	}
	return time.Since(f.healthySince)
}

func (f *feed) health() (ready, healthy bool, lastErr string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ready, f.healthy, f.errText()
}

// errText is the text of the mirror's last error, "" when none (f.mu held).
func (f *feed) errText() string {
	if f.lastErr == nil {
		return ""
	}
	return f.lastErr.Error()
}

// lastError is the mirror's last error while it cannot read the catalog
// (the catalog's own, or errMirrorStopped once its watch has ended), nil
// when it can or has had no error yet: whatever makes it healthy clears
// the error.
func (f *feed) lastError() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.lastErr
}

// view is what one subscriber sees: its query decides which instances are
// visible, exactly as the catalog's own Watch decides it.
type view struct{ q switchboard.Query }

func (v view) visible(st *state) bool {
	return st != nil && v.q.Selects(&st.inst, st.inst.Stale)
}

// translate turns one feed entry into the event this subscriber gets, if
// any: the same transitions as the hub's (added when an instance becomes
// visible, removed when it stops being visible, updated when it changes
// while visible).
func (v view) translate(e *entry) (kind switchboard.EventKind, reason switchboard.Reason, st *state, ok bool) {
	switch e.kind {
	case switchboard.EventSynced:
		return e.kind, "", nil, true
	case switchboard.EventError:
		return e.kind, "", nil, true
	}
	was, is := v.visible(e.prev), v.visible(e.next)
	switch {
	case !was && is:
		return switchboard.EventAdded, "", e.next, true
	case was && is:
		return switchboard.EventUpdated, "", e.next, true
	case was && !is:
		if e.kind == switchboard.EventRemoved {
			return switchboard.EventRemoved, e.reason, e.gone, true
		}
		return switchboard.EventRemoved, switchboard.RemovalReason(&e.next.inst, e.next.inst.Stale), e.next, true
	}
	return "", "", nil, false
}

// snapshot returns the instances visible to v, by name then id, and the seq
// they are consistent with.
// snapshot returns the visible instances, the seq they reflect, and, when
// the mirror cannot read the catalog at that seq, why (else "").
func (f *feed) snapshot(v view) ([]*state, int64, string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.snapshotLocked(v), f.head, f.downLocked()
}

// down says why the mirror cannot read the catalog now ("" when it can).
func (f *feed) down() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.downLocked()
}

func (f *feed) downLocked() string {
	if f.healthy {
		return ""
	}
	return cmp.Or(f.errText(), "the catalog is unreachable")
}

func (f *feed) snapshotLocked(v view) []*state {
	out := make([]*state, 0, len(f.state))
	for _, st := range f.state {
		if v.visible(st) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b *state) int {
		return cmp.Or(cmp.Compare(a.inst.Name, b.inst.Name), cmp.Compare(a.inst.ID, b.inst.ID))
	})
	return out
}

// since returns the entries after seq (at most max), the channel closed on
// the next append, and lost=true when seq is older than the history kept.
func (f *feed) since(seq int64, max int) (es []entry, wake <-chan struct{}, lost bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if seq >= f.head {
		return nil, f.wake, false
	}
	if seq+1 < f.first {
		return nil, f.wake, true
	}
	from := int(seq + 1 - f.first)
	to := min(len(f.ring), from+max)
	return slices.Clone(f.ring[from:to]), f.wake, false
}

// resumable reports whether the history still holds everything after seq.
func (f *feed) resumable(seq int64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return seq <= f.head && seq+1 >= f.first
}

// waitReady waits for the initial snapshot.
func (f *feed) waitReady(ctx context.Context) error {
	select {
	case <-f.done:
		return errMirrorStopped // even when ready: nothing updates it
	default:
	}
	select {
	case <-f.readyCh:
		return nil
	case <-f.done:
		return errMirrorStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitTimeout bounds how long a write waits for the mirror to show it.
const awaitTimeout = 2 * time.Second

// await waits until the mirror's row for id satisfies cond (nil: no row),
// so that a client that has its answer and then watches through this
// server finds its own write in the snapshot. It gives up after
// awaitTimeout (the write stands; only the read-your-writes order is
// lost). Before the mirror's first snapshot it waits for that too: the
// snapshot may predate the write, which then arrives as an event.
func (f *feed) await(ctx context.Context, id string, cond func(st *state) bool) {
	deadline := time.NewTimer(awaitTimeout)
	defer deadline.Stop()
	for {
		f.mu.RLock()
		ready := f.ready
		ok := ready && cond(f.state[id])
		wake := f.wake
		f.mu.RUnlock()
		if ok {
			return
		}
		var readyCh <-chan struct{}
		if !ready {
			readyCh = f.readyCh
		}
		select {
		case <-wake:
		case <-readyCh:
		case <-deadline.C:
			f.log.Debug("server mirror: a write did not show within the wait", "id", id, "wait", awaitTimeout)
			return
		case <-ctx.Done():
			return
		case <-f.done:
			return
		}
	}
}

// sameContent reports whether the mirror's st shows in as written: the
// same content (last_seen aside) and active.
func sameContent(st *state, in *switchboard.Instance) bool {
	if st == nil || st.inst.Stale {
		return false
	}
	a := &st.inst
	return a.Name == in.Name && a.Type == in.Type && a.Address == in.Address &&
		slices.Equal(a.Capabilities, in.Capabilities) && a.Version == in.Version &&
		maps.Equal(a.Metadata, in.Metadata) && sameJSON(a.Components, in.Components) &&
		a.TTL == in.TTL && a.RegisteredAt.Equal(in.RegisteredAt)
}

// sameJSON compares two documents ignoring insignificant whitespace (a
// backend may store them reformatted).
func sameJSON(a, b json.RawMessage) bool {
	if string(a) == string(b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
