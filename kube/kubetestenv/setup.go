package kubetestenv

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/deploy"
)

var nsSeq atomic.Int64

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the TinyModule CRD (deploy/crd), if it is not there
// yet, and waits until it is established.
func InstallCRD(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(deploy.TinyModuleCRD, &obj.Object); err != nil {
		return fmt.Errorf("parse CRD: %w", err)
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD: %w", err)
	}
	for {
		got, err := dyn.Resource(crdGVR).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD not established: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Setup returns the server's client configuration and a new, empty
// namespace with the TinyModule CRD installed (the namespace is deleted at
// cleanup). It skips or fails as Require does.
func Setup(t testing.TB) (*rest.Config, string) {
	t.Helper()
	s := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := InstallCRD(ctx, s.Config); err != nil {
		t.Fatal(err)
	}
	core, err := corev1client.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	base, err := switchboard.SanitizeName(t.Name())
	if err != nil {
		base = "test"
	}
	name := fmt.Sprintf("t%d-%s", nsSeq.Add(1), base)
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = core.Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return s.Config, name
}

// Apply creates every object of a multi-document YAML manifest (such as
// deploy/rbac.yaml) through the dynamic client; kinds are mapped by the
// server's discovery.
func Apply(ctx context.Context, cfg *rest.Config, manifest []byte) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, doc := range strings.Split(string(manifest), "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return fmt.Errorf("parse manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := obj.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
