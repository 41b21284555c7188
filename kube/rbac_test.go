package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
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

// waitAllowed waits until the API server's authorizer lets cfg's user
// create TinyModules in ns: a Role and RoleBinding just created reach the
// authorizer through its own informers, later on a loaded host.
func waitAllowed(ctx context.Context, t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	az, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the authorizer to see the RoleBinding", func() bool {
		r, err := az.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "create", Group: "operator.tinysystems.io", Resource: "tinymodules"}},
		}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
}

// rbacServer starts an API server that authorizes with RBAC, with the CRD
// installed and namespace ns created, and returns its admin config.
func rbacServer(ctx context.Context, t *testing.T, ns string) *rest.Config {
	t.Helper()
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
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return admin
}

// TestRBACManifest runs a module as the ServiceAccount of deploy/rbac.yaml
// on an API server that authorizes with RBAC: the Role is enough to create
// the TinyModule, elect a leader, publish status and watch; an account
// without the binding is refused.
func TestRBACManifest(t *testing.T) {
	kubetestenv.Require(t) // the program is there (or the test skips/fails as documented)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "tinysystems"
	admin := rbacServer(ctx, t, ns)
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
	waitAllowed(ctx, t, sa, ns)
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

// TestLeaseRefusalIsLogged: a module whose Role lets it read and write
// TinyModules and list and watch Leases, but not get, create or update
// them, starts, and never leads. client-go's elector says why only in
// klog: the module's own logger must say it (at Error level, naming the
// Lease and the missing permission), once, and that it works again when
// the Role is fixed, after which the replica leads without a restart.
func TestLeaseRefusalIsLogged(t *testing.T) {
	kubetestenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "restricted"
	admin := rbacServer(ctx, t, ns)
	rbac, err := rbacv1client.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "no-lease-writes", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"operator.tinysystems.io"}, Resources: []string{"tinymodules", "tinymodules/status"}, Verbs: []string{"*"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
		},
	}
	if role, err = rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-lease-writes", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "restricted-module", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var logs testkit.SyncBuffer
	waitAllowed(ctx, t, asServiceAccount(admin, ns, "restricted-module"), ns)
	sa, reqs := counted(asServiceAccount(admin, ns, "restricted-module"))
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "restricted-module", Version: "1.0.0", Addr: "10.1.2.3:8483", Identity: "restricted-module-0",
		Namespace: ns, Config: sa,
		RetryPeriod: 200 * time.Millisecond,
		Logger:      slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("start with list and watch on Leases: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	refusal := func(line map[string]any) bool {
		return line["level"] == "ERROR" && line["lease"] == ns+"/restricted-module-lock" && line["op"] == "get" &&
			strings.Contains(fmt.Sprint(line["msg"]), "leases.coordination.k8s.io") && strings.Contains(fmt.Sprint(line["err"]), "forbidden")
	}
	testkit.WaitUntil(t, "the module's logger to report the refused Lease", func() bool {
		return countLogs(t, logs.String(), refusal) > 0
	})
	// The election retries every 200 ms: a few more refusals, no more logs.
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/restricted-module-lock"
	testkit.WaitUntil(t, "the election to try the Lease a few times", func() bool {
		return reqs.count(http.MethodGet, leasePath) >= 4
	})
	if m.IsLeader() {
		t.Fatal("leads without access to its Lease")
	}

	// The Role is fixed: the replica leads, and says the Lease works again.
	role.Rules[1].Verbs = []string{"get", "list", "watch", "create", "update"}
	if _, err := rbac.Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the replica to lead once the Role allows it", m.IsLeader)
	testkit.WaitUntil(t, "the module's logger to report the Lease working again", func() bool {
		return countLogs(t, logs.String(), func(line map[string]any) bool {
			return line["level"] == "INFO" && line["op"] == "get" && strings.Contains(fmt.Sprint(line["msg"]), "works again")
		}) == 1
	})
	if n := countLogs(t, logs.String(), refusal); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once until it changed:\n%s", n, logs.String())
	}
}

// countLogs counts the JSON log lines that match.
func countLogs(t *testing.T, logs string, match func(map[string]any) bool) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if l == "" {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if match(line) {
			n++
		}
	}
	return n
}
