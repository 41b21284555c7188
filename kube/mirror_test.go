package kube

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// handFedMirror returns a mirror of namespace ns whose informers never run:
// a test fills their stores by hand and calls the handlers.
func handFedMirror() *mirror {
	m := newMirror(&client{ns: "ns"}, time.Now)
	m.modInf = cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.TinyModule{}, 0, cache.Indexers{})
	m.leaseInf = cache.NewSharedIndexInformer(&cache.ListWatch{}, &coordinationv1.Lease{}, 0, cache.Indexers{})
	return m
}

// The two informers of a mirror deliver the deletions of a Reap or a
// Deregister (module, then Lease) in any interleaving of each one's store
// with the other's handler. In every one, the log holds one change, the
// removal, with the reason the Lease gives: expired for a Lease past its
// deadline (a Reap), deregistered for a live one. Logging the module
// without a Lease made a reaped module "updated" (TTL 0, no leader) before
// its removal (catalogtest WatchReapAfterExpiry, seen under load); judging
// it without the Lease the store had just dropped made it "deregistered"
// (the fixed-clock test, seen under load). No API server: the stores are
// filled by hand and the handlers called as the informers would.
func TestLeaseDeletedBeforeItsModule(t *testing.T) {
	// Every interleaving of the module's (store, then handler) with the
	// Lease's (store, then handler): m, M, l, L.
	orders := []string{"mMlL", "mlML", "mlLM", "lmML", "lmLM", "lLmM"}
	for _, tc := range []struct {
		name   string
		renew  time.Duration // the Lease's renew time, from now
		reason switchboard.Reason
	}{
		{"expired Lease (a Reap)", -time.Minute, switchboard.ReasonExpired},
		{"live Lease (a Deregister)", 0, switchboard.ReasonDeregistered},
	} {
		for _, order := range orders {
			t.Run(tc.name+"/"+order, func(t *testing.T) {
				m := handFedMirror()
				renew := metav1.NewMicroTime(time.Now().Add(tc.renew))
				l := &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Name: "m" + LeaseSuffix, Namespace: "ns"},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(RegisterHolder), LeaseDurationSeconds: ptr.To(int32(30)),
						AcquireTime: &renew, RenewTime: &renew},
				}
				tm := &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"},
					Status: v1alpha1.TinyModuleStatus{Addr: "127.0.0.1:4317"}}
				for _, err := range []error{m.modInf.GetStore().Add(tm), m.leaseInf.GetStore().Add(l)} {
					if err != nil {
						t.Fatal(err)
					}
				}
				m.moduleChanged(tm)
				m.leaseChanged(nil, l)
				before := len(m.changes)
				for _, step := range order {
					var err error
					switch step {
					case 'm':
						err = m.modInf.GetStore().Delete(tm)
					case 'M':
						m.moduleDeleted(tm)
					case 'l':
						err = m.leaseInf.GetStore().Delete(l)
					case 'L':
						m.leaseChanged(l, nil)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				if got := m.changes[before:]; len(got) != 1 {
					t.Fatalf("log after the deletions: %+v, want only the removal", got)
				}
				if c := m.changes[before]; !c.Deleted || c.ID != "m" || c.Reason != tc.reason {
					t.Fatalf("change: %+v, want the removal of m (%s)", c, tc.reason)
				}
				if len(m.modules) != 0 || len(m.leases) != 0 {
					t.Fatalf("kept after both deletions: modules %v, leases %v", m.modules, m.leases)
				}
			})
		}
	}
}

// A mirror's handlers run behind its informers' stores, which a snapshot
// reads: an event handed over after a snapshot that already showed a newer
// state must not take a watcher back, a Lease change is logged with the
// Lease as it is now, removals carry their own revisions (a deletion's, or
// the state's when learned from a relist), and a module created again
// after its deletion comes back. No API server: the handlers are called as
// the informers would, on stores filled by hand, and a real hub reads the
// mirror.
func TestMirrorNeverGoesBack(t *testing.T) {
	m := handFedMirror()
	m.started = true // the stores are filled by hand
	mods, leases := m.modInf.GetStore(), m.leaseInf.GetStore()
	module := func(name, rv, version string) *v1alpha1.TinyModule {
		return &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv},
			Status: v1alpha1.TinyModuleStatus{Addr: "127.0.0.1:4317", Version: version}}
	}
	lease := func(name, holder, rv string) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name + LeaseSuffix, Namespace: "ns", ResourceVersion: rv},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(300)),
				AcquireTime: &now, RenewTime: &now},
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(mods.Add(module("a", "20", "2.0.0")))
	must(leases.Add(lease("a", "pod-a", "5")))

	h := hub.New(m, hub.Options{})
	m.hub = h
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := h.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	next := func() switchboard.Event {
		t.Helper()
		for {
			select {
			case ev := <-ch:
				if ev.Kind != switchboard.EventSynced {
					return ev
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no event within 20s")
			}
		}
	}
	expect := func(kind switchboard.EventKind, id string, rev int64) switchboard.Event {
		t.Helper()
		ev := next()
		if ev.Kind != kind || ev.Instance.ID != id || ev.Revision != rev {
			t.Fatalf("got %s %s at revision %d (version %q, leader %q); want %s %s at %d",
				ev.Kind, ev.Instance.ID, ev.Revision, ev.Instance.Version, ev.Instance.Metadata[MetaLeader], kind, id, rev)
		}
		return ev
	}
	if ev := expect(switchboard.EventAdded, "a", 20); ev.Instance.Version != "2.0.0" {
		t.Fatalf("snapshot: a at version %q", ev.Instance.Version)
	}

	// The handler catches up with an update the snapshot already showed a
	// later one of: nothing.
	m.moduleChanged(module("a", "10", "1.0.0"))
	// The Lease changed hands twice; the handler brings the first change
	// while the store holds the second: the watcher sees the second.
	must(leases.Update(lease("a", "pod-c", "7")))
	m.leaseChanged(lease("a", "pod-a", "5"), lease("a", "pod-b", "6"))
	if ev := expect(switchboard.EventUpdated, "a", 20); ev.Instance.Metadata[MetaLeader] != "pod-c" || ev.Instance.Version != "2.0.0" {
		t.Fatalf("Lease change: a led by %q at version %q, want pod-c at 2.0.0", ev.Instance.Metadata[MetaLeader], ev.Instance.Version)
	}

	// Deleted by a watch event (at the deletion's revision), created again.
	must(mods.Delete(module("a", "20", "2.0.0")))
	m.moduleDeleted(module("a", "40", "2.0.0"))
	must(mods.Add(module("a", "45", "3.0.0")))
	m.moduleChanged(module("a", "45", "3.0.0"))
	expect(switchboard.EventRemoved, "a", 40)
	if ev := expect(switchboard.EventAdded, "a", 45); ev.Instance.Version != "3.0.0" {
		t.Fatalf("a created again at version %q", ev.Instance.Version)
	}

	// Deleted as a relist learns it (the last state seen), and b's address
	// withdrawn by an update: each at the revision of the state it removes.
	must(mods.Add(module("b", "50", "1.0.0")))
	must(leases.Add(lease("b", "pod-b", "51")))
	m.moduleChanged(module("b", "50", "1.0.0"))
	expect(switchboard.EventAdded, "b", 50)
	must(mods.Delete(module("a", "45", "3.0.0")))
	m.moduleDeleted(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: module("a", "45", "3.0.0")})
	expect(switchboard.EventRemoved, "a", 45)
	withdrawn := module("b", "60", "1.0.0")
	withdrawn.Status.Addr = ""
	must(mods.Update(withdrawn))
	m.moduleChanged(withdrawn)
	expect(switchboard.EventRemoved, "b", 60)

	// A resync reads the stores: nothing differs, nothing is sent; the
	// next change is the next event.
	h.Resync()
	must(mods.Add(module("c", "70", "1.0.0")))
	must(leases.Add(lease("c", "pod-c", "71")))
	m.moduleChanged(module("c", "70", "1.0.0"))
	expect(switchboard.EventAdded, "c", 70)
}
