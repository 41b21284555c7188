package kube

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// The two informers of a mirror deliver the deletions of a Reap (module,
// then Lease) in either order. Lease first, the module keeps its last Lease
// until its own deletion: whether that Lease had expired (a Reap) or not (a
// Deregister), the log holds one change, the removal, with the reason the
// Lease gives. Logging the module without a Lease made a reaped module
// "updated" (TTL 0, no leader) before its removal (catalogtest
// WatchReapAfterExpiry, seen under load). No API server: the handlers are
// called as the informers would, on stores filled by hand.
func TestLeaseDeletedBeforeItsModule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		renew  time.Duration // the Lease's renew time, from now
		reason switchboard.Reason
	}{
		{"expired Lease (a Reap)", -time.Minute, switchboard.ReasonExpired},
		{"live Lease (a Deregister)", 0, switchboard.ReasonDeregistered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &mirror{c: &client{ns: "ns"}, epoch: "test", now: time.Now}
			m.modInf = cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.TinyModule{}, 0, cache.Indexers{})
			m.leaseInf = cache.NewSharedIndexInformer(&cache.ListWatch{}, &coordinationv1.Lease{}, 0, cache.Indexers{})
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
			if err := m.leaseInf.GetStore().Delete(l); err != nil {
				t.Fatal(err)
			}
			m.leaseChanged(l, nil)
			if err := m.modInf.GetStore().Delete(tm); err != nil {
				t.Fatal(err)
			}
			m.moduleDeleted(tm)
			if len(m.changes) != 1 {
				t.Fatalf("log: %+v, want only the removal", m.changes)
			}
			if c := m.changes[0]; !c.Deleted || c.ID != "m" || c.Reason != tc.reason {
				t.Fatalf("change: %+v, want the removal of m (%s)", c, tc.reason)
			}
			if len(m.vanished) != 0 {
				t.Fatalf("vanished kept after the module's deletion: %v", m.vanished)
			}
		})
	}
}
