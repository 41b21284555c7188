package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// maxLog bounds the in-memory change log the hub reads; a hub that falls
// further behind resyncs from a snapshot (hub.ErrCursorGone).
const maxLog = 4096

// mirror watches the TinyModules and Leases of one namespace with two
// informers, and is the hub's Source: it turns their events into a change
// log (a TinyModule created, changed or deleted; a Lease that changes hands,
// changes duration, or is renewed after it had expired), and answers
// renewals (Lease renew times) in bulk. Plain renewals are not changes.
//
// Versions: every state it logs or snapshots carries its TinyModule's
// resourceVersion as Instance.Revision, and every removal the revision it
// happened at (a deletion's own resourceVersion, or the version of the
// state it removes when the informer learned it from a relist), while the
// log is numbered by the mirror: the hub compares revisions with
// revisions (Change.Revision, Batch.Revision, Snapshot.Revision). A
// change is logged with the objects as the informers hold them when it is
// logged, the module's as its event brings it; the hub takes a state only
// when it is not older than the one it holds, so an event handed over
// after a snapshot that already showed a newer state undoes nothing.
type mirror struct {
	c     *client
	hub   *hub.Hub
	epoch string // this mirror's log: positions mean nothing to another mirror
	// now is the catalog's clock (Catalog.now): the staleness of what the
	// mirror logs and the Now of its snapshots and batches are read from it.
	now func() time.Time

	startMu  sync.Mutex // serialises start and stop
	started  bool       // the informers run and have synced once
	closed   bool       // stop was called: start fails from now on
	cancel   context.CancelFunc
	stopped  sync.WaitGroup
	modInf   cache.SharedIndexInformer
	leaseInf cache.SharedIndexInformer

	mu      sync.Mutex
	seq     int64
	changes []hub.Change // the last maxLog changes, by Seq
	// rev is the highest revision the log has held: of a state logged or
	// of a removal (Batch.Revision).
	rev int64
	// leaseStore is the Lease informer's store once it runs, for readers
	// outside the hub (leaseHolder).
	leaseStore cache.Store
	failed     [2]error // per informer (modules, leases): its last list/watch failure, nil once one succeeds
	watchErr   error    // the first of failed, nil when both informers reach the API server
	// The handlers' own view, which runs behind the informers' stores:
	// modules holds the modules whose addition the module handler has
	// delivered and whose deletion it has not; leases, by module, the
	// Lease as the Lease handler last delivered it, kept past the Lease's
	// deletion while its module is in modules. Deregister and Reap delete
	// both objects, and the two informers deliver the deletions in any
	// interleaving with each other's stores: a module whose Lease has left
	// the store keeps the Lease it had until its own deletion is handled,
	// so it goes stale at that Lease's deadline, as after a stopped
	// heartbeat, and its removal says whether the Lease had expired.
	modules map[string]struct{}
	leases  map[string]*coordinationv1.Lease
}

func newMirror(c *client, now func() time.Time) *mirror {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &mirror{c: c, now: now, epoch: "kube-" + hex.EncodeToString(b[:]),
		modules: map[string]struct{}{}, leases: map[string]*coordinationv1.Lease{}}
}

// start runs the informers and waits for their first lists. When they do
// not sync before ctx ends (the API server cannot be reached), it stops
// them and fails; the next call starts afresh, so a catalog whose first
// watch came during an outage recovers with the server.
func (m *mirror) start(ctx context.Context) error {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	if m.closed {
		return switchboard.ErrClosed
	}
	if m.started {
		return nil
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.mu.Lock()
	m.failed = [2]error{}
	m.watchErr = nil
	m.modules = map[string]struct{}{}
	m.leases = map[string]*coordinationv1.Lease{}
	m.mu.Unlock()
	m.modInf = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := m.c.listModules(ctx, o)
			m.reached(0, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := m.c.watchModules(ctx, o)
			m.reached(0, err)
			return w, err
		},
	}, &v1alpha1.TinyModule{}, 0, cache.Indexers{})
	m.leaseInf = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := m.c.leases.List(ctx, o)
			m.reached(1, err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := m.c.leases.Watch(ctx, o)
			m.reached(1, err)
			return w, err
		},
	}, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = m.modInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.moduleChanged(obj) },
		UpdateFunc: func(_, obj any) { m.moduleChanged(obj) },
		DeleteFunc: m.moduleDeleted,
	})
	_, _ = m.leaseInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.leaseChanged(nil, obj) },
		UpdateFunc: m.leaseChanged,
		DeleteFunc: func(obj any) { m.leaseChanged(obj, nil) },
	})
	modInf, leaseInf := m.modInf, m.leaseInf
	m.mu.Lock()
	m.leaseStore = leaseInf.GetStore()
	m.mu.Unlock()
	m.stopped.Add(2)
	go func() { defer m.stopped.Done(); modInf.RunWithContext(runCtx) }()
	go func() { defer m.stopped.Done(); leaseInf.RunWithContext(runCtx) }()
	if !cache.WaitForCacheSync(ctx.Done(), modInf.HasSynced, leaseInf.HasSynced) {
		m.mu.Lock()
		err := m.watchErr
		m.mu.Unlock()
		if err == nil {
			err = ctx.Err()
		}
		cancel()
		m.stopped.Wait()
		m.cancel = nil
		m.mu.Lock()
		m.leaseStore = nil
		m.mu.Unlock()
		return fmt.Errorf("kube: list TinyModules and Leases in %q: %w", m.c.ns, err)
	}
	m.started = true
	return nil
}

func (m *mirror) stop() {
	m.startMu.Lock()
	defer m.startMu.Unlock()
	m.closed = true
	if m.cancel != nil {
		m.cancel()
		m.stopped.Wait()
		m.cancel = nil
	}
}

// reached records the outcome of an informer's list or watch request: a
// failure makes the hub report the catalog unreachable (and keep serving
// what it knew) until that informer's next request succeeds.
func (m *mirror) reached(i int, err error) {
	if err != nil && isNotFound(err) {
		err = errNoCRD
	}
	m.mu.Lock()
	changed := (m.failed[i] == nil) != (err == nil)
	m.failed[i] = err
	m.watchErr = m.failed[0]
	if m.watchErr == nil {
		m.watchErr = m.failed[1]
	}
	m.mu.Unlock()
	if changed {
		m.notify()
	}
}

func (m *mirror) notify() {
	if m.hub != nil {
		m.hub.Notify()
	}
}

func (m *mirror) append(c hub.Change) {
	m.seq++
	c.Seq = m.seq
	m.rev = max(m.rev, c.Revision, c.Instance.Revision)
	m.changes = append(m.changes, c)
	if len(m.changes) > maxLog {
		m.changes = append(m.changes[:0:0], m.changes[len(m.changes)-maxLog/2:]...)
	}
}

// leaseHolder returns the holder of the Lease named name as last seen,
// and whether it was seen at all (false before the informers run).
func (m *mirror) leaseHolder(name string) (string, bool) {
	m.mu.Lock()
	st := m.leaseStore
	m.mu.Unlock()
	if st == nil {
		return "", false
	}
	obj, ok, _ := st.GetByKey(m.c.ns + "/" + name)
	if !ok {
		return "", false
	}
	v, _ := viewLease(obj.(*coordinationv1.Lease))
	return v.holder, true
}

// leaseOf returns the module's Lease as the store holds it, or else as
// the Lease handler last delivered it (see leases). Called with m.mu held.
func (m *mirror) leaseOf(module string) *coordinationv1.Lease {
	obj, ok, _ := m.leaseInf.GetStore().GetByKey(m.c.ns + "/" + module + LeaseSuffix)
	if !ok {
		return m.leases[module]
	}
	return obj.(*coordinationv1.Lease)
}

func (m *mirror) moduleOf(name string) *v1alpha1.TinyModule {
	obj, ok, _ := m.modInf.GetStore().GetByKey(m.c.ns + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*v1alpha1.TinyModule)
}

func (m *mirror) moduleChanged(obj any) {
	tm, ok := obj.(*v1alpha1.TinyModule)
	if !ok {
		return
	}
	m.mu.Lock()
	m.modules[tm.Name] = struct{}{}
	m.logModule(tm, m.leaseOf(tm.Name), switchboard.ReasonDeregistered)
	m.mu.Unlock()
	m.notify()
}

// logModule logs the module as it is now: an upsert, or a removal while it
// has no address (not published yet, or withdrawn). Called with m.mu held.
func (m *mirror) logModule(tm *v1alpha1.TinyModule, l *coordinationv1.Lease, reason switchboard.Reason) {
	if !listed(tm) {
		// Unlisted by the update that took its address away: at that
		// update's revision.
		m.append(hub.Change{ID: tm.Name, Deleted: true, Reason: reason, Revision: revisionOf(tm.ResourceVersion)})
		return
	}
	m.append(hub.Change{ID: tm.Name, Instance: toInstance(tm, l, m.now()), Found: true})
}

func (m *mirror) moduleDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	tm, ok := obj.(*v1alpha1.TinyModule)
	if !ok {
		return
	}
	// A module deleted after its Lease had expired (reaped) was already
	// gone for its watchers: it leaves as expired, as reaped rows do. One
	// without a Lease is not judged expired: nothing says it was.
	m.mu.Lock()
	reason := switchboard.ReasonDeregistered
	if l := m.leaseOf(tm.Name); l != nil && toInstance(tm, l, m.now()).Stale {
		reason = switchboard.ReasonExpired
	}
	delete(m.modules, tm.Name)
	// A Lease that lives on is delivered again by its next event; the
	// store holds it meanwhile.
	delete(m.leases, tm.Name)
	// A watch's deletion event carries the object at the deletion's own
	// revision; one learned from a relist (DeletedFinalStateUnknown), the
	// last state seen, which is as good: it lies between that state and
	// any later one of the name.
	m.append(hub.Change{ID: tm.Name, Deleted: true, Reason: reason, Revision: revisionOf(tm.ResourceVersion)})
	m.mu.Unlock()
	m.notify()
}

// leaseChanged keeps the handlers' view of the Lease (see leases) and logs
// a change of the lease's module when the lease changed hands or duration,
// appeared, or was renewed after it had expired (a revival); a plain
// renewal is left to RenewedSince, and a deletion keeps the module on its
// last Lease.
func (m *mirror) leaseChanged(oldObj, obj any) {
	if d, ok := oldObj.(cache.DeletedFinalStateUnknown); ok {
		oldObj = d.Obj
	}
	old, _ := oldObj.(*coordinationv1.Lease)
	cur, _ := obj.(*coordinationv1.Lease)
	name := ""
	switch {
	case cur != nil:
		name = cur.Name
	case old != nil:
		name = old.Name
	}
	module, ok := strings.CutSuffix(name, LeaseSuffix)
	if !ok {
		return
	}
	ov, hadOld := viewLease(old)
	cv, hasCur := viewLease(cur)
	m.mu.Lock()
	_, listed := m.modules[module]
	switch {
	case cur != nil:
		m.leases[module] = cur
	case listed:
		// Deleted while its module is still seen: most often the
		// second half of a Deregister or a Reap, whose module deletion
		// is not handled yet. The module keeps this Lease: a live one
		// goes stale at its deadline, an expired one leaves it as it
		// was (logging the module without a Lease would show a reaped
		// module as updated, then removed).
		m.leases[module] = old
	default:
		delete(m.leases, module)
	}
	if !hasCur || hadOld && ov.holder == cv.holder && ov.ttl == cv.ttl && !m.now().After(ov.deadline()) {
		m.mu.Unlock()
		return // a deletion, or a renewal of a live lease
	}
	tm := m.moduleOf(module)
	if tm == nil {
		m.mu.Unlock()
		return
	}
	// The Lease as the informer holds it now, when it does (leaseOf): a
	// later one than this event's when the handler runs behind the
	// informer, which a snapshot may have shown already (the state keeps
	// its module's revision, so the hub cannot tell the older one apart).
	m.logModule(tm, m.leaseOf(module), switchboard.ReasonExpired)
	m.mu.Unlock()
	m.notify()
}

// Snapshot implements hub.Source.
func (m *mirror) Snapshot(ctx context.Context) (hub.Snapshot, error) {
	if err := m.start(ctx); err != nil {
		return hub.Snapshot{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watchErr != nil {
		return hub.Snapshot{}, m.watchErr
	}
	now := m.now()
	// The store is at least as new as everything logged (handlers run
	// after it is updated): it reflects every revision up to the highest
	// logged or held.
	s := hub.Snapshot{Seq: m.seq, Revision: m.rev, Epoch: m.epoch, Now: now}
	for _, obj := range m.modInf.GetStore().List() {
		tm := obj.(*v1alpha1.TinyModule)
		s.Revision = max(s.Revision, revisionOf(tm.ResourceVersion))
		if listed(tm) {
			s.Instances = append(s.Instances, toInstance(tm, m.leaseOf(tm.Name), now))
		}
	}
	return s, nil
}

// ChangesSince implements hub.Source.
func (m *mirror) ChangesSince(ctx context.Context, cur hub.Cursor) (hub.Batch, error) {
	seq := cur.Seq // the informers hand events over in order: no gaps
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watchErr != nil {
		return hub.Batch{}, m.watchErr
	}
	b := hub.Batch{Seq: m.seq, Revision: m.rev, Epoch: m.epoch, Now: m.now()}
	if seq >= m.seq {
		return b, nil
	}
	if len(m.changes) == 0 || m.changes[0].Seq > seq+1 {
		return hub.Batch{}, hub.ErrCursorGone
	}
	i := int(seq + 1 - m.changes[0].Seq)
	b.Changes = append([]hub.Change(nil), m.changes[i:]...)
	return b, nil
}

// RenewedSince implements hub.Source: the renew times of the Leases of
// modules with an address, renewed after since.
func (m *mirror) RenewedSince(ctx context.Context, since time.Time) ([]hub.Renewal, time.Time, error) {
	m.mu.Lock()
	err := m.watchErr
	m.mu.Unlock()
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []hub.Renewal
	for _, obj := range m.leaseInf.GetStore().List() {
		l := obj.(*coordinationv1.Lease)
		module, ok := strings.CutSuffix(l.Name, LeaseSuffix)
		if !ok {
			continue
		}
		v, _ := viewLease(l)
		if !v.renew.After(since) {
			continue
		}
		if tm := m.moduleOf(module); tm != nil && tm.Status.Addr != "" {
			out = append(out, hub.Renewal{ID: tm.Name, LastSeen: v.renew})
		}
	}
	return out, m.now(), nil
}
