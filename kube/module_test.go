package kube_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
	"github.com/switchboard-io/switchboard/pool"
	"github.com/switchboard-io/switchboard/router"
)

// serveModule runs a gRPC module server whose every node answers
// "<module>:<payload>" — the module's Service, shared by its replicas.
func serveModule(t *testing.T, module string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.New(router.Options{Module: module})
	if err != nil {
		t.Fatal(err)
	}
	r.HandleDefault(func(_ context.Context, msg *router.Message) ([]byte, error) {
		return []byte(module + ":" + string(msg.Payload)), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = grpcwire.Serve(ctx, lis, r.Dispatch, grpcwire.ServerOptions{}) }()
	t.Cleanup(func() { cancel(); <-done })
	return lis.Addr().String()
}

func newPool(t *testing.T) *pool.Pool {
	p := pool.New(pool.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	p.Start(ctx)
	t.Cleanup(func() { cancel(); p.Close() })
	return p
}

type replica struct {
	*kube.Module
	pool *pool.Pool
}

func startReplica(t *testing.T, cfg *rest.Config, ns, module, identity, version, addr string) replica {
	t.Helper()
	p := newPool(t)
	// The module runs until Close (or the end of the context it starts with).
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: module, Version: version, Addr: addr, Identity: identity,
		Namespace: ns, Config: cfg, Pool: p, Image: "example.invalid/" + module,
		Components: []v1alpha1.TinyModuleComponentStatus{{
			Name: "echo", Description: "answers", Tags: []string{"test"},
			Ports: []v1alpha1.TinyModuleComponentPort{{Name: "in", Label: "In", Position: 3, Schema: []byte(`{"type":"string"}`)}},
		}},
	})
	if err != nil {
		t.Fatalf("start %s/%s: %v", module, identity, err)
	}
	t.Cleanup(func() { m.Close() })
	return replica{Module: m, pool: p}
}

func leaders(rs ...replica) []replica {
	var out []replica
	for _, r := range rs {
		if r.IsLeader() {
			out = append(out, r)
		}
	}
	return out
}

func leaseHolder(t *testing.T, cfg *rest.Config, ns, lease string) string {
	t.Helper()
	c, err := coordclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func send(ctx context.Context, r *router.Router, to, payload string) (string, error) {
	out, err := r.Send(ctx, &router.Message{To: to, Payload: []byte(payload)})
	return string(out), err
}

// TestTwoModulesTwoReplicas is the module side end to end on a real API
// server: two modules with two replicas each, in one process with distinct
// identities.
func TestTwoModulesTwoReplicas(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	addrA, addrB := serveModule(t, "module-a"), serveModule(t, "module-b")
	a1 := startReplica(t, cfg, ns, "module-a", "module-a-5d8f7c9b6-x2k4p", "1.0.0", addrA)
	a2 := startReplica(t, cfg, ns, "module-a", "module-a-5d8f7c9b6-q9z7m", "1.0.0", addrA)
	b1 := startReplica(t, cfg, ns, "module-b", "module-b-7f6d5c4b3-aaaaa", "1.0.0", addrB)
	b2 := startReplica(t, cfg, ns, "module-b", "module-b-7f6d5c4b3-bbbbb", "2.0.0", addrB)

	// Exactly one leader per module, and it holds the Lease.
	testkit.WaitUntil(t, "one leader per module", func() bool {
		return len(leaders(a1, a2)) == 1 && len(leaders(b1, b2)) == 1
	})
	for _, pair := range [][2]replica{{a1, a2}, {b1, b2}} {
		l := leaders(pair[0], pair[1])
		if len(l) != 1 {
			t.Fatalf("%s: %d leaders", pair[0].Name(), len(l))
		}
		if h := leaseHolder(t, cfg, ns, pair[0].Name()+"-lock"); h != l[0].Identity() {
			t.Fatalf("%s-lock held by %q, leader is %q", pair[0].Name(), h, l[0].Identity())
		}
	}

	// The leader's status appears.
	cat := a1.Catalog()
	var inB switchboard.Instance
	testkit.WaitUntil(t, "module-b's status", func() bool {
		in, err := cat.Get(context.Background(), "module-b")
		inB = in
		return err == nil && in.Address == addrB && !in.Stale
	})
	leaderB := leaders(b1, b2)[0]
	wantVersion := map[string]string{b1.Identity(): "1.0.0", b2.Identity(): "2.0.0"}[leaderB.Identity()]
	if inB.Version != wantVersion || inB.Metadata[kube.MetaLeader] != leaderB.Identity() ||
		inB.Metadata[kube.MetaModuleName] != "module-b" || inB.Metadata[kube.MetaSDKVersion] == "" ||
		!strings.Contains(string(inB.Components), `"ports":[{"name":"in"`) || inB.TTL != kube.DefaultLeaseDuration {
		t.Fatalf("module-b as seen by module-a: %+v (components %s)", inB, inB.Components)
	}

	// Module A's pool learns B's address (and never its own), and A routes
	// a message to a node of B over gRPC.
	testkit.WaitUntil(t, "module-a's pools to learn module-b", func() bool {
		return slices.Equal(a1.pool.Modules()["module-b"], []string{addrB}) &&
			slices.Equal(a2.pool.Modules()["module-b"], []string{addrB})
	})
	if _, ok := a1.pool.Modules()["module-a"]; ok {
		t.Fatal("module-a's pool registered module-a itself")
	}
	ra, err := router.New(router.Options{Module: "module-a", Wire: a1.pool})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := send(ctx, ra, "flow1.module-b.node1:in", "hello"); err != nil || got != "module-b:hello" {
		t.Fatalf("A → B: %q, %v", got, err)
	}
	// The cache of every replica sees both modules.
	testkit.WaitUntil(t, "discovery caches to hold both modules", func() bool {
		for _, r := range []replica{a1, a2, b1, b2} {
			if len(r.Cache().ByName("module-a")) != 1 || len(r.Cache().ByName("module-b")) != 1 {
				return false
			}
		}
		return true
	})

	// The leader of B is cancelled: the other replica leads (within the
	// lease duration on a host that is not overloaded: logged, not
	// asserted) and re-publishes (its own version).
	other := b1
	if leaderB == b1 {
		other = b2
	}
	start := time.Now()
	leaderB.Close()
	testkit.WaitUntil(t, other.Identity()+" to lead", other.IsLeader)
	t.Logf("takeover after %v (lease duration %v)", time.Since(start), kube.DefaultLeaseDuration)
	testkit.WaitUntil(t, "the new leader to re-publish", func() bool {
		in, err := cat.Get(context.Background(), "module-b")
		return err == nil && in.Version == wantVersionOf(b1, b2, other) && in.Metadata[kube.MetaLeader] == other.Identity() && !in.Stale
	})
	if got, err := send(ctx, ra, "flow1.module-b.node1:in", "again"); err != nil || got != "module-b:again" {
		t.Fatalf("A → B after failover: %q, %v", got, err)
	}

	// B's TinyModule deleted → A deregisters B.
	if err := cat.Deregister(ctx, "module-b"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "module-a's pool to deregister module-b", func() bool {
		_, ok := a1.pool.Modules()["module-b"]
		return !ok && len(a1.Cache().ByName("module-b")) == 0
	})
	_, err = send(ctx, ra, "flow1.module-b.node1:in", "gone")
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeModuleUnknown {
		t.Fatalf("send to a deleted module: %v, want %s", err, router.CodeModuleUnknown)
	}
}

func wantVersionOf(b1, b2, r replica) string {
	if r.Identity() == b1.Identity() {
		return "1.0.0"
	}
	return "2.0.0"
}

// TestIdentitiesDifferingOnlyAtTheEnd: two pods whose long names differ
// only in their last characters are two contenders, never one.
func TestIdentitiesDifferingOnlyAtTheEnd(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	base := "tinysystems-http-module-v0-controller-manager-67fc65b5bc-" + strings.Repeat("x", 20)
	id1, id2 := base+"1", base+"2"
	if len(id1) <= 63 {
		t.Fatalf("identities must be longer than a label: %d", len(id1))
	}
	addr := serveModule(t, "http-module")
	r1 := startReplica(t, cfg, ns, "http-module", id1, "1", addr)
	r2 := startReplica(t, cfg, ns, "http-module", id2, "1", addr)
	if r1.Identity() != id1 || r2.Identity() != id2 {
		t.Fatalf("identities rewritten: %q %q", r1.Identity(), r2.Identity())
	}
	testkit.WaitUntil(t, "a leader", func() bool { return len(leaders(r1, r2)) == 1 })
	// Both contend for a while: never two leaders, and the Lease names the
	// leader in full.
	for i := 0; i < 30; i++ {
		if n := len(leaders(r1, r2)); n > 1 {
			t.Fatal("two pods lead at once")
		}
		time.Sleep(100 * time.Millisecond)
	}
	l := leaders(r1, r2)[0]
	if h := leaseHolder(t, cfg, ns, "http-module-lock"); h != l.Identity() {
		t.Fatalf("lease holder %q, leader %q", h, l.Identity())
	}
	follower := r1
	if l == r1 {
		follower = r2
	}
	if follower.Leader() != l.Identity() {
		t.Fatalf("follower sees leader %q, want %q", follower.Leader(), l.Identity())
	}
	l.Close()
	testkit.WaitUntil(t, "the other pod to lead", follower.IsLeader)
	if h := leaseHolder(t, cfg, ns, "http-module-lock"); h != follower.Identity() {
		t.Fatalf("lease holder %q after takeover, want %q", h, follower.Identity())
	}
}

// TestExpiredLeaseIsStale: a module whose Lease is no longer renewed (all
// its pods died) is reported stale and routed to no more.
func TestExpiredLeaseIsStale(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := serveModule(t, "mortal")
	p := newPool(t)
	if err := p.Follow(ctx, cat, switchboard.Query{}); err != nil {
		t.Fatal(err)
	}
	r, err := router.New(router.Options{Module: "caller", Wire: p})
	if err != nil {
		t.Fatal(err)
	}
	// A module whose last pod wrote a 2 s Lease and died.
	if _, err := cat.Register(ctx, switchboard.Instance{Name: "mortal", Type: kube.TypeModule, Address: addr, TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the pool to learn the module", func() bool {
		_, ok := p.Modules()["mortal"]
		return ok
	})
	if got, err := send(ctx, r, "f.mortal.n:in", "x"); err != nil || got != "mortal:x" {
		t.Fatalf("send while alive: %q %v", got, err)
	}
	testkit.WaitUntil(t, "the module to be listed stale", func() bool {
		all, err := cat.List(ctx, switchboard.Query{All: true})
		active, err2 := cat.List(ctx, switchboard.Query{})
		return err == nil && err2 == nil && len(all) == 1 && all[0].Stale && len(active) == 0
	})
	testkit.WaitUntil(t, "the pool to drop the stale module", func() bool {
		_, ok := p.Modules()["mortal"]
		return !ok
	})
	_, err = send(ctx, r, "f.mortal.n:in", "x")
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeModuleUnknown {
		t.Fatalf("send to a stale module: %v", err)
	}
	// Its TinyModule is still there, with its old address: only the Lease
	// says it is dead.
	in, err := cat.Get(ctx, "mortal")
	if err != nil || in.Address != addr || !in.Stale {
		t.Fatalf("stale module: %+v %v", in, err)
	}
	// A renewal brings it back.
	if missing, err := cat.Heartbeat(ctx, "mortal"); err != nil || len(missing) != 0 {
		t.Fatalf("heartbeat: %v %v", missing, err)
	}
	testkit.WaitUntil(t, "the pool to learn the revived module", func() bool {
		_, ok := p.Modules()["mortal"]
		return ok
	})
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ in, res, lease string }{
		{"github.com/tiny-systems/common-module", "github-com-tiny-systems-common-module", "github-com-tiny-systems-common-module-lock"},
		{"Playground a84afb40: When a webhook is hit, post the body to a Slack channel",
			"webhook-is-hit-post-the-body-to-a-slack-channel", "webhook-is-hit-post-the-body-to-a-slack-channel-lock"},
	} {
		res, err := kube.ResourceName(tc.in)
		lease, err2 := kube.LeaseName(tc.in)
		if err != nil || err2 != nil || res != tc.res || lease != tc.lease {
			t.Errorf("%q: resource %q lease %q (%v %v), want %q %q", tc.in, res, lease, err, err2, tc.res, tc.lease)
		}
	}
	if _, err := kube.LeaseName("--"); !errors.Is(err, switchboard.ErrInvalidName) {
		t.Errorf("LeaseName(--) = %v", err)
	}
	long := strings.Repeat("pod-", 30) + "z"
	t.Setenv("POD_NAME", "")
	t.Setenv("HOSTNAME", long)
	if id, err := kube.Identity(); err != nil || id != long {
		t.Errorf("Identity() = %q, %v: want the whole HOSTNAME", id, err)
	}
	t.Setenv("POD_NAME", long+"2")
	if id, _ := kube.Identity(); id != long+"2" {
		t.Errorf("Identity() = %q: POD_NAME first", id)
	}
}

// A live Lease deleted while its TinyModule stays (the order in which a
// watcher may see the two deletions of a Deregister) is no change of the
// module: it goes stale at that Lease's deadline, as after a stopped
// heartbeat, and never shows as an update.
func TestDeletedLiveLeaseExpiresAtItsDeadline(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The watch starts first, so that the module is seen added however
	// slow the host: a Lease that ran out before a later watch's snapshot
	// would never be seen at all.
	events, err := cat.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := coordclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := func(want switchboard.EventKind) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Kind == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s event", want)
			}
		}
	}
	next(switchboard.EventSynced)
	in, err := cat.Register(ctx, switchboard.Instance{Name: "orphan", Type: kube.TypeModule, Address: "127.0.0.1:4317", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next(switchboard.EventAdded)
	if err := leases.Leases(ns).Delete(ctx, in.ID+kube.LeaseSuffix, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Kind != switchboard.EventRemoved || ev.Reason != switchboard.ReasonExpired || ev.Instance.ID != in.ID {
			t.Fatalf("after its live Lease was deleted: %s/%s %s, want removed/expired", ev.Kind, ev.Reason, ev.Instance.ID)
		}
		// Never before its Lease ran out (a lower bound cannot flake).
		if lag := time.Since(in.LastSeen); lag < in.TTL {
			t.Fatalf("expired %v after its last renewal, before its TTL %v", lag, in.TTL)
		}
	case <-ctx.Done():
		t.Fatal("the module never expired")
	}
}
