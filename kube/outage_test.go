package kube_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
)

// TestOutage: while the API server cannot be reached, a discovery cache on
// kube:// keeps serving the last known modules, marked stale; afterwards it
// catches up with what changed meanwhile.
func TestOutage(t *testing.T) {
	cfg, ns, viaProxy, px := behindProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	writer := openCatalog(t, cfg, ns)
	reg := func(name string) {
		t.Helper()
		if _, err := writer.Register(ctx, switchboard.Instance{Name: name, Type: kube.TypeModule, Address: "10.1.1.1:8483", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	reg("steady")
	reader, err := kube.New(viaProxy, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	cache, err := discovery.New(ctx, reader, discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	if len(cache.ByName("steady")) != 1 {
		t.Fatal("cache does not hold the module")
	}

	px.Refuse()
	testkit.WaitUntil(t, "the cache to say it is stale", func() bool {
		stale, _ := cache.Stale()
		return stale
	})
	if len(cache.ByName("steady")) != 1 {
		t.Fatal("an unreachable API server emptied the cache")
	}
	if st := reader.WatchStats(); st.Healthy || st.LastError == nil {
		t.Fatalf("watch stats during the outage: %+v", st)
	}
	reg("newcomer")
	if err := writer.Deregister(ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	px.Restore()
	testkit.WaitUntil(t, "the cache to catch up", func() bool {
		stale, _ := cache.Stale()
		return !stale && len(cache.ByName("newcomer")) == 1 && len(cache.ByName("steady")) == 0
	})
}

// behindProxy is a namespace of its own on the test API server, and a
// config that reaches the server through a proxy the test can cut (every
// connection closed, new ones closed at once) and restore.
func behindProxy(t *testing.T) (cfg *rest.Config, ns string, viaProxy *rest.Config, px *testkit.Proxy) {
	t.Helper()
	cfg, ns = kubetestenv.Setup(t)
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	px = testkit.NewProxy(t, u.Host)
	viaProxy = rest.CopyConfig(cfg)
	viaProxy.Host = "https://" + px.Addr()
	return cfg, ns, viaProxy, px
}

// openCatalog is the kube:// catalog of ns, closed at cleanup.
func openCatalog(t *testing.T, cfg *rest.Config, ns string) *kube.Catalog {
	t.Helper()
	cat, err := kube.New(cfg, ns, switchboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}
