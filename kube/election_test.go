package kube_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// TestLeaderReContends: a leader whose Lease is taken from it steps down,
// contends again, leads again once the other holder stops renewing, and
// re-publishes; a status written behind the leader's back is put back.
func TestLeaderReContends(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "phoenix", Version: "3.1.4", Addr: "10.2.2.2:8483", Identity: "phoenix-0",
		Namespace: ns, Config: cfg,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.WaitUntil(t, "phoenix-0 to lead and publish", func() bool {
		in, err := m.Catalog().Get(ctx, "phoenix")
		return m.IsLeader() && err == nil && in.Version == "3.1.4"
	})

	// Someone rewrites the status: the leader puts it back.
	if err := m.Catalog().SetStatus(ctx, "phoenix", v1alpha1.TinyModuleStatus{Addr: "10.9.9.9:1", Name: "phoenix", Version: "0.0.0"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the leader to restore its status", func() bool {
		in, err := m.Catalog().Get(ctx, "phoenix")
		return err == nil && in.Version == "3.1.4" && in.Address == "10.2.2.2:8483"
	})

	// An intruder takes the Lease (once, for 2 s): the leader steps down...
	leases, err := coordclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leases.Leases(ns).Get(ctx, "phoenix-lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	l.Spec.HolderIdentity = ptr.To("intruder")
	l.Spec.LeaseDurationSeconds = ptr.To(int32(2))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := leases.Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "phoenix-0 to step down", func() bool { return !m.IsLeader() })
	// ...contends again, and leads once the intruder's Lease has run out.
	testkit.WaitUntil(t, "phoenix-0 to lead again", m.IsLeader)
	testkit.WaitUntil(t, "the Lease to name phoenix-0 again", func() bool {
		return leaseHolder(t, cfg, ns, "phoenix-lock") == "phoenix-0"
	})
}

// TestCloseEndsElection: a RunElection of the user's own ends with the
// catalog it runs on: Close makes it release the Lease, and waits for that,
// and RunElection returns ErrClosed.
func TestCloseEndsElection(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	leading := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- cat.RunElection(context.Background(), kube.ElectionConfig{
			Lease: "own-lock", Identity: "own-0",
			LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 300 * time.Millisecond,
			OnStartedLeading: func(context.Context) { once.Do(func() { close(leading) }) },
		})
	}()
	select {
	case <-leading:
	case <-time.After(time.Minute):
		t.Fatal("own-0 never led")
	}
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the release: the 30 s Lease is free at once.
	if h := leaseHolder(t, cfg, ns, "own-lock"); h != "" {
		t.Fatalf("the Lease is still held by %q after Close", h)
	}
	select {
	case err := <-done:
		if !errors.Is(err, switchboard.ErrClosed) {
			t.Fatalf("RunElection after Close: %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("RunElection still runs after Close")
	}
}
