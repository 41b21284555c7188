package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestFirstWatchDuringOutageRecovers: a catalog handle whose first Watch
// fails because the API server cannot be reached is not broken for good:
// once the server answers again, the next Watch (a pool following the
// catalog retries) lists and watches as usual.
func TestFirstWatchDuringOutageRecovers(t *testing.T) {
	cfg, ns, viaProxy, px := behindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	writer := openCatalog(t, cfg, ns)
	if _, err := writer.Register(ctx, switchboard.Instance{Name: "early", Type: kube.TypeModule, Address: "10.1.1.1:8483", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	reader, err := kube.New(viaProxy, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })

	px.Refuse()
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	_, err = reader.Watch(wctx, switchboard.Query{})
	wcancel()
	if err == nil {
		t.Fatal("Watch succeeded with the API server unreachable")
	}
	px.Restore()

	var events <-chan switchboard.Event
	testkit.WaitUntil(t, "a Watch to succeed once the API server answers", func() bool {
		ch, err := reader.Watch(ctx, switchboard.Query{})
		if err != nil {
			t.Logf("watch: %v", err)
			return false
		}
		events = ch
		return true
	})
	got := map[string]bool{}
	for ev := range events {
		if ev.Kind == switchboard.EventSynced {
			break
		}
		got[ev.Instance.ID] = true
	}
	if !got["early"] {
		t.Fatalf("the snapshot after recovery lacks the module: %v", got)
	}
}

// TestModuleContextEndStopsEverything: StartModule's doc says the end of
// its context stops everything, as Close does: the election, the watches,
// and the catalog's informers (no watch of the API server outlives it).
func TestModuleContextEndStopsEverything(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := kube.StartModule(ctx, kube.ModuleConfig{
		Name: "ephemeral", Version: "1.0.0", Addr: "10.3.3.3:8483", Identity: "ephemeral-0",
		Namespace: ns, Config: cfg, Pool: newPool(t),
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	testkit.WaitUntil(t, "ephemeral-0 to lead", m.IsLeader)
	cancel()
	testkit.WaitUntil(t, "the end of the context to close the module's catalog", func() bool {
		_, err := m.Catalog().List(context.Background(), switchboard.Query{})
		return errors.Is(err, switchboard.ErrClosed)
	})
	if m.IsLeader() {
		t.Fatal("a stopped module still says it leads")
	}
	// A leader releases its Lease on the way out.
	testkit.WaitUntil(t, "the Lease to be released", func() bool {
		return leaseHolder(t, cfg, ns, "ephemeral-lock") == ""
	})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLameDuckLeaderDoesNotWrite: a leader whose Lease someone else now
// holds keeps believing it leads until client-go gives up renewing (the
// renew deadline). Meanwhile it must neither say it leads nor write status:
// a status written by the new holder stays as it is.
func TestLameDuckLeaderDoesNotWrite(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "lameduck", Version: "1.0.0", Addr: "10.4.4.4:8483", Identity: "lameduck-0",
		Namespace: ns, Config: cfg,
		LeaseDuration: 6 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.WaitUntil(t, "lameduck-0 to lead and publish", func() bool {
		in, err := m.Catalog().Get(ctx, "lameduck")
		return m.IsLeader() && err == nil && in.Version == "1.0.0"
	})

	// Another holder takes the Lease for a minute and writes its status.
	leases, err := coordclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leases.Leases(ns).Get(ctx, "lameduck-lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	l.Spec.HolderIdentity = ptr.To("usurper")
	l.Spec.LeaseDurationSeconds = ptr.To(int32(60))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := leases.Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Catalog().SetStatus(ctx, "lameduck", v1alpha1.TinyModuleStatus{Addr: "10.5.5.5:8483", Name: "lameduck", Version: "2.0.0"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "lameduck-0 to stop saying it leads", func() bool { return !m.IsLeader() })
	// client-go reports the new leader once it gives up renewing: by then
	// the lame duck has had its whole renew deadline to write.
	testkit.WaitUntil(t, "lameduck-0 to see the usurper lead", func() bool { return m.Leader() == "usurper" })
	if m.IsLeader() {
		t.Fatal("lameduck-0 says it leads while the usurper holds the Lease")
	}
	in, err := m.Catalog().Get(ctx, "lameduck")
	if err != nil {
		t.Fatal(err)
	}
	if in.Version != "2.0.0" || in.Address != "10.5.5.5:8483" {
		t.Fatalf("the lame duck overwrote the new holder's status: %s %s", in.Version, in.Address)
	}
}

// TestNilConfig: a nil *rest.Config is the default configuration (as in
// ModuleConfig), not a panic; nil and empty inputs elsewhere are errors.
func TestNilConfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster, even if the tests run in one
	cat, err := kube.New(nil, "default", switchboard.Options{})
	if err == nil {
		cat.Close()
		t.Fatal("New(nil) outside a cluster with no kubeconfig succeeded")
	}
	if !strings.Contains(err.Error(), "KUBECONFIG") {
		t.Fatalf("New(nil): %v, want it to say how to configure the client", err)
	}
	cfg, ns := kubetestenv.Setup(t)
	if _, err := kube.New(cfg, "", switchboard.Options{}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("New with no namespace: %v", err)
	}
	if _, err := kube.StartModule(context.Background(), kube.ModuleConfig{Name: "--", Namespace: ns, Config: cfg, Identity: "x"}); err == nil {
		t.Fatal("StartModule with a name that sanitises to nothing succeeded")
	}
	cat, err = kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cat.Close()
	cat.Close()
	if err := cat.RunElection(context.Background(), kube.ElectionConfig{Lease: "closed-lock", Identity: "x"}); !errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("RunElection on a closed catalog: %v, want ErrClosed", err)
	}
	open := openCatalog(t, cfg, ns)
	for _, ec := range []kube.ElectionConfig{{Identity: "x"}, {Lease: "Bad Name", Identity: "x"}, {Lease: "ok-lock"}} {
		if err := open.RunElection(context.Background(), ec); !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("RunElection(%+v): %v, want ErrInvalid", ec, err)
		}
	}
}

// TestRegisterMetadataRoundTrips: metadata registered through the catalog
// comes back as registered, including the keys a TinyModule keeps in its
// own fields (image, module_name, sdk_version), which were dropped.
func TestRegisterMetadataRoundTrips(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	cat := openCatalog(t, cfg, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md := map[string]string{
		kube.MetaImage: "registry.example/acme/x:1.2.3", kube.MetaModuleName: "github.com/acme/x",
		kube.MetaSDKVersion: "v0.13.1", "zone": "eu-1",
	}
	in := switchboard.Instance{Name: "roundtrip", Type: kube.TypeModule, Address: "10.6.6.6:8483", TTL: time.Minute,
		Capabilities: []string{"b", "a"}, Metadata: md}
	reg, err := cat.Register(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cat.Get(ctx, reg.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []switchboard.Instance{reg, got} {
		for k, v := range md {
			if g.Metadata[k] != v {
				t.Errorf("metadata %q: %q, want %q (all: %v)", k, g.Metadata[k], v, g.Metadata)
			}
		}
	}
	// Registering again without them removes them.
	in.Metadata = map[string]string{"zone": "eu-2"}
	if _, err := cat.Register(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err = cat.Get(ctx, reg.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{kube.MetaImage, kube.MetaModuleName, kube.MetaSDKVersion} {
		if v, ok := got.Metadata[k]; ok {
			t.Errorf("metadata %q still %q after re-registering without it", k, v)
		}
	}
	if got.Metadata["zone"] != "eu-2" {
		t.Errorf("zone %q", got.Metadata["zone"])
	}
}

// TestConcurrentRegisterSameID: processes registering the same new id at
// the same moment (a restart racing its predecessor, or replicas of a
// registrar) all succeed: whoever loses the race to create the TinyModule
// or its Lease updates the winner's instead of failing with AlreadyExists.
func TestConcurrentRegisterSameID(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 8
	cats := make([]*kube.Catalog, n)
	for i := range cats {
		c, err := kube.New(cfg, ns, switchboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cats[i] = c
	}
	for round := range 3 {
		id := fmt.Sprintf("contended-%d", round)
		errs := make(chan error, n)
		start := make(chan struct{})
		for _, c := range cats {
			go func() {
				<-start
				_, err := c.Register(ctx, switchboard.Instance{ID: id, Name: "contended", Type: kube.TypeModule, Address: "10.7.7.7:8483", TTL: time.Minute})
				errs <- err
			}()
		}
		close(start)
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: concurrent Register: %v", round, err)
			}
		}
	}
}
