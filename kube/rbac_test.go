package kube_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/deploy"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

func asServiceAccount(cfg *rest.Config, ns, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return c
}

// TestRBACManifest runs a module as the ServiceAccount of deploy/rbac.yaml
// on an API server that authorizes with RBAC: the Role is enough to create
// the TinyModule, elect a leader, publish status and watch; an account
// without the binding is refused.
func TestRBACManifest(t *testing.T) {
	kubetestenv.Require(t) // the program is there (or the test skips/fails as documented)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := kubetestenv.Start(ctx, "-rbac")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	admin := srv.Config
	if err := kubetestenv.InstallCRD(ctx, admin); err != nil {
		t.Fatal(err)
	}
	core, err := corev1client.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "tinysystems"
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubetestenv.Apply(ctx, admin, deploy.RBAC); err != nil {
		t.Fatal(err)
	}

	// Without the binding: refused.
	nobody, err := kube.New(asServiceAccount(admin, ns, "nobody"), ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer nobody.Close()
	if _, err := nobody.List(ctx, switchboard.Query{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list without the Role: %v, want Forbidden", err)
	}

	// With it: the whole module side works.
	sa := asServiceAccount(admin, ns, "example-module")
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "example-module", Version: "1.0.0", Addr: "example-module.tinysystems.svc.cluster.local:8483",
		Identity: "example-module-6c9f8d7b5-k2x9q", Namespace: ns, Config: sa,
	})
	if err != nil {
		t.Fatalf("start as the module's ServiceAccount: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	testkit.WaitUntil(t, "leader and published status", func() bool {
		in, err := m.Catalog().Get(ctx, "example-module")
		return m.IsLeader() && err == nil && in.Version == "1.0.0" && !in.Stale
	})
	testkit.WaitUntil(t, "the module's watch to see itself", func() bool {
		return len(m.Cache().ByName("example-module")) == 1
	})
}
