package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// LoadConfig returns the client configuration: the kubeconfig named by
// KUBECONFIG (or ~/.kube/config) when there is one, else the in-cluster
// configuration of a pod's service account. It also returns the namespace
// of the kubeconfig's current context (or of the pod), "default" when none
// is set.
func LoadConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err == nil {
		ns, _, nerr := cc.Namespace()
		if nerr != nil || ns == "" {
			ns = "default"
		}
		return cfg, ns, nil
	}
	in, ierr := rest.InClusterConfig()
	if ierr != nil {
		return nil, "", fmt.Errorf("kube: no kubeconfig (%v) and not in a cluster (%v): set KUBECONFIG", err, ierr)
	}
	ns := "default"
	if b, rerr := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); rerr == nil && strings.TrimSpace(string(b)) != "" {
		ns = strings.TrimSpace(string(b))
	}
	return in, ns, nil
}

var (
	scheme         = runtime.NewScheme()
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err) // a programming error in the types package
	}
}

// client talks to the API server about the TinyModules and Leases of one
// namespace.
type client struct {
	ns     string
	rc     rest.Interface
	leases coordclient.LeaseInterface
	coord  coordclient.CoordinationV1Interface
}

func newClient(cfg *rest.Config, ns string) (*client, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = "switchboard"
	}
	if c.QPS == 0 {
		c.QPS, c.Burst = 50, 100
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kube: tinymodule client: %w", err)
	}
	lc := rest.CopyConfig(cfg)
	if lc.UserAgent == "" {
		lc.UserAgent = "switchboard"
	}
	if lc.QPS == 0 {
		lc.QPS, lc.Burst = 50, 100
	}
	coord, err := coordclient.NewForConfig(lc)
	if err != nil {
		return nil, fmt.Errorf("kube: lease client: %w", err)
	}
	return &client{ns: ns, rc: rc, coord: coord, leases: coord.Leases(ns)}, nil
}

func (c *client) getModule(ctx context.Context, name string) (*v1alpha1.TinyModule, error) {
	out := &v1alpha1.TinyModule{}
	err := c.rc.Get().Namespace(c.ns).Resource(v1alpha1.Resource).Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *client) listModules(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.TinyModuleList, error) {
	out := &v1alpha1.TinyModuleList{}
	err := c.rc.Get().Namespace(c.ns).Resource(v1alpha1.Resource).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *client) watchModules(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rc.Get().Namespace(c.ns).Resource(v1alpha1.Resource).VersionedParams(&opts, parameterCodec).Watch(ctx)
}

// createModule creates tm. With strict, the API server refuses a field its
// TinyModule CRD does not have (fieldValidation=Strict) instead of
// dropping it: a CRD older than these types fails the write (crdErr says
// so) rather than losing what it has no place for.
func (c *client) createModule(ctx context.Context, tm *v1alpha1.TinyModule, strict bool) (*v1alpha1.TinyModule, error) {
	out := &v1alpha1.TinyModule{}
	req := c.rc.Post().Namespace(c.ns).Resource(v1alpha1.Resource)
	if strict {
		req = req.Param("fieldValidation", metav1.FieldValidationStrict)
	}
	err := req.Body(tm).Do(ctx).Into(out)
	return out, err
}

// updateModule replaces tm (its spec and metadata), with strict field
// validation as createModule's.
func (c *client) updateModule(ctx context.Context, tm *v1alpha1.TinyModule) (*v1alpha1.TinyModule, error) {
	out := &v1alpha1.TinyModule{}
	err := c.rc.Put().Namespace(c.ns).Resource(v1alpha1.Resource).Name(tm.Name).
		Param("fieldValidation", metav1.FieldValidationStrict).Body(tm).Do(ctx).Into(out)
	return out, err
}

// patchModule applies a JSON merge patch to the TinyModule name, with
// strict field validation as createModule's.
func (c *client) patchModule(ctx context.Context, name string, patch []byte) (*v1alpha1.TinyModule, error) {
	out := &v1alpha1.TinyModule{}
	err := c.rc.Patch(types.MergePatchType).Namespace(c.ns).Resource(v1alpha1.Resource).Name(name).
		Param("fieldValidation", metav1.FieldValidationStrict).Body(patch).Do(ctx).Into(out)
	return out, err
}

func (c *client) updateModuleStatus(ctx context.Context, tm *v1alpha1.TinyModule) (*v1alpha1.TinyModule, error) {
	out := &v1alpha1.TinyModule{}
	err := c.rc.Put().Namespace(c.ns).Resource(v1alpha1.Resource).Name(tm.Name).SubResource("status").Body(tm).Do(ctx).Into(out)
	return out, err
}

func (c *client) deleteModule(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.rc.Delete().Namespace(c.ns).Resource(v1alpha1.Resource).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *client) getLease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	return c.leases.Get(ctx, name, metav1.GetOptions{})
}

// isNotFound reports a 404 from the API server.
func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// noResource is what the API server's 404 says when the resource itself is
// unknown (no CRD installed), not one object of it.
const noResource = "the server could not find the requested resource"

// objectMissing reports a 404 for one object: not the 404 of a resource
// the API server does not serve (which apiErr names).
func objectMissing(err error) bool {
	return isNotFound(err) && !strings.Contains(err.Error(), noResource)
}

// errNoCRD says the TinyModule CRD is not installed.
var errNoCRD = errors.New("the TinyModule CRD (tinymodules.operator.tinysystems.io) is not installed: kubectl apply -f deploy/crd/")
