package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/deploy"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// nextEvent waits for the next event of ch that is not a synced marker.
func nextEvent(t *testing.T, ch <-chan switchboard.Event) switchboard.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the watch ended")
			}
			if ev.Kind != switchboard.EventSynced {
				return ev
			}
		case <-deadline:
			t.Fatal("no event within a minute")
		}
	}
}

// TestTrafficStateOfAModule: the traffic state of a module run by its own
// replicas is its TinyModule's spec: an operator's merge patch (what
// `kubectl patch` sends) is one update for watchers; a status written over
// it, as the SDK's leader writes its whole status, keeps it; and
// Catalog.Drain of the module is one update that keeps weight and zone.
func TestTrafficStateOfAModule(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "weighed", Version: "1.0.0", Addr: "10.2.3.6:8483", Identity: "weighed-0",
		Namespace: ns, Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cat := openCatalog(t, cfg, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testkit.WaitUntil(t, "weighed-0 to lead and publish", func() bool {
		in, err := cat.Get(ctx, "weighed")
		return m.IsLeader() && err == nil && in.Version == "1.0.0" && !in.Stale
	})
	events, err := cat.Watch(ctx, switchboard.Query{Name: "weighed"})
	if err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, events)
	if ev.Kind != switchboard.EventAdded || ev.Instance.Weight != switchboard.DefaultWeight || ev.Instance.Zone != "" || ev.Instance.Draining {
		t.Fatalf("first event: %s, weight %d, zone %q, draining %v; want added, %d, no zone, not draining",
			ev.Kind, ev.Instance.Weight, ev.Instance.Zone, ev.Instance.Draining, switchboard.DefaultWeight)
	}

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	modules := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	if _, err := modules.Patch(ctx, "weighed", types.MergePatchType,
		[]byte(`{"spec":{"weight":300,"zone":"eu-west-1a","draining":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events)
	if ev.Kind != switchboard.EventUpdated || ev.Instance.Weight != 300 || ev.Instance.Zone != "eu-west-1a" || !ev.Instance.Draining ||
		ev.Instance.Status() != switchboard.StatusDraining || ev.Instance.Serving() || ev.Instance.Stale {
		t.Fatalf("after the patch: %s, weight %d, zone %q, status %s, serving %v, stale %v; want updated, 300, eu-west-1a, draining, not serving",
			ev.Kind, ev.Instance.Weight, ev.Instance.Zone, ev.Instance.Status(), ev.Instance.Serving(), ev.Instance.Stale)
	}

	// Another writer of the status (the SDK's leader writes it whole,
	// knowing nothing of the traffic fields): the spec stays, and so does
	// it when this module's leader publishes its own status again.
	if err := cat.SetStatus(ctx, "weighed", v1alpha1.TinyModuleStatus{Addr: "10.2.3.6:8483", Version: "0.9.0"}); err != nil {
		t.Fatal(err)
	}
	sawOther := false
	for {
		ev = nextEvent(t, events)
		if ev.Kind != switchboard.EventUpdated || ev.Instance.Weight != 300 || ev.Instance.Zone != "eu-west-1a" || !ev.Instance.Draining {
			t.Fatalf("a status write changed the traffic state: %s, weight %d, zone %q, draining %v",
				ev.Kind, ev.Instance.Weight, ev.Instance.Zone, ev.Instance.Draining)
		}
		sawOther = sawOther || ev.Instance.Version == "0.9.0"
		if sawOther && ev.Instance.Version == "1.0.0" {
			break // the leader restored its status
		}
	}

	off, err := cat.Drain(ctx, "weighed", false)
	if err != nil {
		t.Fatal(err)
	}
	if off.Draining || off.Weight != 300 || off.Zone != "eu-west-1a" || !off.Serving() {
		t.Fatalf("Drain(false): draining %v, weight %d, zone %q, serving %v", off.Draining, off.Weight, off.Zone, off.Serving())
	}
	ev = nextEvent(t, events)
	if ev.Kind != switchboard.EventUpdated || ev.Instance.Draining || ev.Revision != off.Revision {
		t.Fatalf("the undrain's event: %s, draining %v at revision %d; want updated, not draining, at %d",
			ev.Kind, ev.Instance.Draining, ev.Revision, off.Revision)
	}
	obj, err := modules.Get(ctx, "weighed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "draining"); found {
		t.Fatalf("an undrained module keeps spec.draining: %v", obj.Object["spec"])
	}
}

// TestCRDValidatesTraffic: the CRD's schema refuses what the catalog's
// validation refuses, so a module edited by hand cannot hold a weight or
// zone the catalog would not store.
func TestCRDValidatesTraffic(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	cat := openCatalog(t, cfg, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := cat.Register(ctx, switchboard.Instance{ID: "edited", Name: "edited", Type: "module", Address: "127.0.0.1:9",
		Weight: 200, Zone: "zone-a"})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	modules := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
	for _, patch := range []string{
		`{"spec":{"weight":0}}`,
		`{"spec":{"weight":-5}}`,
		`{"spec":{"weight":10001}}`,
		`{"spec":{"weight":"heavy"}}`,
		`{"spec":{"zone":"eu west"}}`,
		`{"spec":{"zone":"-a"}}`,
		`{"spec":{"zone":"` + strings.Repeat("z", 64) + `"}}`,
		`{"spec":{"draining":"yes"}}`,
	} {
		_, err := modules.Patch(ctx, "edited", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
			t.Errorf("patch %s: %v, want the API server to refuse it", patch, err)
		}
	}
	got, err := cat.Get(ctx, "edited")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != in.Revision || got.Weight != 200 || got.Zone != "zone-a" || got.Draining {
		t.Fatalf("refused patches changed the module: weight %d, zone %q, draining %v at revision %d (was %d)",
			got.Weight, got.Zone, got.Draining, got.Revision, in.Revision)
	}
	// The largest weight and the longest zone are valid on both sides.
	if _, err := modules.Patch(ctx, "edited", types.MergePatchType,
		[]byte(`{"spec":{"weight":10000,"zone":"`+strings.Repeat("z", 63)+`"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err = cat.Get(ctx, "edited"); err != nil || got.Weight != switchboard.MaxWeight || len(got.Zone) != 63 {
		t.Fatalf("after the largest weight and longest zone: %+v %v", got, err)
	}
}

// TestOlderCRDRefusesTrafficClearly: on a cluster whose TinyModule CRD has
// no traffic fields (one older than these types, or another program's),
// the API server would drop them from a write without a word. Registering
// with the default weight and no zone writes none of them and works; a
// weight, a zone or a drain fails with an error that names the field and
// says to apply deploy/crd, and nothing stored changes. A server of its
// own: the CRD is cluster-wide.
func TestOlderCRDRefusesTrafficClearly(t *testing.T) {
	kubetestenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := kubetestenv.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	installOldCRD(ctx, t, srv.Config)
	core, err := corev1client.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "older-crd"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cat := openCatalog(t, srv.Config, ns)

	plain := switchboard.Instance{ID: "plain", Name: "plain", Type: "module", Address: "127.0.0.1:9"}
	a, err := cat.Register(ctx, plain)
	if err != nil {
		t.Fatalf("a registration without traffic fields on an older CRD: %v", err)
	}
	if a.Weight != switchboard.DefaultWeight || a.Zone != "" || a.Draining {
		t.Fatalf("registered: weight %d, zone %q, draining %v", a.Weight, a.Zone, a.Draining)
	}
	wantOld := func(what string, err error, field string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "kubectl apply -f deploy/crd/") {
			t.Fatalf("%s: %v; want an error naming %s and saying to apply deploy/crd", what, err, field)
		}
		if errors.Is(err, switchboard.ErrInvalid) || errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("%s: %v is not the caller's mistake", what, err)
		}
	}
	heavy := plain
	heavy.Weight = 250
	_, err = cat.Register(ctx, heavy)
	wantOld("a weight", err, "spec.weight")
	zoned := plain
	zoned.ID, zoned.Zone = "zoned", "eu-west-1a"
	_, err = cat.Register(ctx, zoned)
	wantOld("a zone", err, "spec.zone")
	_, err = cat.Drain(ctx, "plain", true)
	wantOld("a drain", err, "spec.draining")

	if _, err := cat.Get(ctx, "zoned"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the refused registration of a new id stored a module: %v", err)
	}
	leases, err := coordclient.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Leases(ns).Get(ctx, "zoned"+kube.LeaseSuffix, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused registration of a new id left its Lease: %v", err)
	}
	got, err := cat.Get(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != a.Revision || got.Weight != switchboard.DefaultWeight || got.Draining {
		t.Fatalf("refused writes changed the module: weight %d, draining %v at revision %d (was %d)",
			got.Weight, got.Draining, got.Revision, a.Revision)
	}
	// Undraining a module that is not drained writes nothing, so it
	// works whatever the CRD.
	if off, err := cat.Drain(ctx, "plain", false); err != nil || off.Draining || off.Revision != a.Revision {
		t.Fatalf("Drain(false) of a module not drained: %+v %v", off, err)
	}
}

// installOldCRD installs the TinyModule CRD of deploy/crd without the
// spec's traffic fields, and waits until it is established.
func installOldCRD(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(deploy.TinyModuleCRD, &crd.Object); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("the CRD has %d versions, want 1", len(versions))
	}
	v := versions[0].(map[string]any)
	path := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties"}
	props, found, err := unstructured.NestedMap(v, path...)
	if err != nil || !found {
		t.Fatalf("no spec properties in the CRD: %v", err)
	}
	for _, f := range []string{"weight", "zone", "draining"} {
		if _, ok := props[f]; !ok {
			t.Fatalf("the CRD has no spec.%s to leave out", f)
		}
		delete(props, f)
	}
	if err := unstructured.SetNestedMap(v, props, path...); err != nil {
		t.Fatal(err)
	}
	delete(v, "additionalPrinterColumns")
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the older CRD to be established", func() bool {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
}
