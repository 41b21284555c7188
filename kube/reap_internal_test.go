package kube

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

// newTestCatalog is a catalog with the default options in a namespace of
// its own on the test API server, closed when the test ends, and a
// context of a minute for the test's calls.
func newTestCatalog(t *testing.T) (*Catalog, context.Context) {
	t.Helper()
	cfg, ns := kubetestenv.Setup(t)
	cat, err := New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return cat, ctx
}

// registerModule registers a module named name at addr with that TTL in cat
// and returns the Lease the registration wrote.
func registerModule(t *testing.T, ctx context.Context, cat *Catalog, name, addr string, ttl time.Duration) *coordinationv1.Lease {
	t.Helper()
	if _, err := cat.Register(ctx, switchboard.Instance{Name: name, Type: TypeModule, Address: addr, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	l, err := cat.c.getLease(ctx, name+LeaseSuffix)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReapSparesReleasedLease: a Lease released by a leader that stepped
// down (client-go writes no holder and a 1 s duration) keeps its module
// active for ReleaseGrace while a successor takes over; Reap must not
// delete that module at twice the 1 s — a TinyModule deleted under a
// running module is not re-created. Reap judges by the catalog's clock,
// fixed here: 3 s after the release (past twice 1 s, inside ReleaseGrace),
// then past twice ReleaseGrace, when the module is reaped.
func TestReapSparesReleasedLease(t *testing.T) {
	cat, ctx := newTestCatalog(t)
	l := registerModule(t, ctx, cat, "handover", "10.8.8.8:8483", 15*time.Second)
	released := metav1.NewMicroTime(time.Now().Truncate(time.Second))
	l.Spec.HolderIdentity = ptr.To("")
	l.Spec.LeaseDurationSeconds = ptr.To(int32(1))
	l.Spec.AcquireTime, l.Spec.RenewTime = &released, &released
	if _, err := cat.c.leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	cat.now = func() time.Time { return released.Add(3 * time.Second) }
	n, err := cat.Reap(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("Reap deleted %d modules, among them one whose released Lease is still in its grace", n)
	}
	if _, err := cat.Get(ctx, "handover"); err != nil {
		t.Fatal(err)
	}

	// Past twice ReleaseGrace nobody took over: the module is reaped.
	cat.now = func() time.Time { return released.Add(2*ReleaseGrace + time.Second) }
	if n, err := cat.Reap(ctx, 0); err != nil || n != 1 {
		t.Fatalf("Reap past twice ReleaseGrace: %d, %v; want the module reaped", n, err)
	}
}
