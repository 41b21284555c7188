package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/kube"
	"github.com/switchboard-io/switchboard/kube/kubetestenv"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

// requests counts the API requests made through a config, by method and
// path ("PUT /apis/…/status").
type requests struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *requests) count(method, path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[method+" "+path]
}

type countingTransport struct {
	next http.RoundTripper
	r    *requests
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.r.mu.Lock()
	c.r.n[req.Method+" "+req.URL.Path]++
	c.r.mu.Unlock()
	return c.next.RoundTrip(req)
}

// counted returns cfg with every request it makes counted.
func counted(cfg *rest.Config) (*rest.Config, *requests) {
	r := &requests{n: map[string]int{}}
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, r: r} })
	return c, r
}

// TestStatusNotRewrittenWhenUnchanged: the leader compares the stored
// status with its own semantically. Component lists with empty (not nil)
// tags, ports or schemas come back from the API server without them; a
// plain comparison saw a difference on every check and wrote the same
// status again each time its TinyModule changed.
func TestStatusNotRewrittenWhenUnchanged(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	mcfg, reqs := counted(cfg)
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "steadfast", Version: "1.0.0", Addr: "10.2.3.4:8483", Identity: "steadfast-0",
		Namespace: ns, Config: mcfg,
		Components: []v1alpha1.TinyModuleComponentStatus{{
			Name: "echo", Tags: []string{},
			Ports: []v1alpha1.TinyModuleComponentPort{{Name: "in", Schema: []byte{}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cat := openCatalog(t, cfg, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testkit.WaitUntil(t, "steadfast-0 to lead and publish", func() bool {
		in, err := cat.Get(ctx, "steadfast")
		return m.IsLeader() && err == nil && in.Version == "1.0.0" && strings.Contains(string(in.Components), `"echo"`)
	})
	base := "/apis/operator.tinysystems.io/v1alpha1/namespaces/" + ns + "/tinymodules/steadfast"
	writes := reqs.count(http.MethodPut, base+"/status")
	if writes == 0 {
		t.Fatal("no status write counted")
	}

	// Each change of the TinyModule that is not its status (an annotation
	// here) makes the leader check its status: one read of the TinyModule.
	// The publisher checks one change at a time, so once the read of the
	// next check is seen, the previous check has finished.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		reads := reqs.count(http.MethodGet, base)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{\"round\":\"%d\"}"}}}`, kube.AnnotationMetadata, round)
		if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Patch(ctx, "steadfast", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.WaitUntil(t, "the leader to check its status", func() bool {
			return reqs.count(http.MethodGet, base) > reads
		})
	}
	if got := reqs.count(http.MethodPut, base+"/status"); got != writes {
		t.Fatalf("%d status writes after checks that found the status as published, want %d", got, writes)
	}
}

// TestComponentsCopied: StartModule copies ModuleConfig.Components; what its
// caller does with the slice afterwards is not published.
func TestComponentsCopied(t *testing.T) {
	cfg, ns := kubetestenv.Setup(t)
	comps := []v1alpha1.TinyModuleComponentStatus{{
		Name: "echo", Description: "answers", Tags: []string{"original"},
		Ports: []v1alpha1.TinyModuleComponentPort{{Name: "in", Schema: []byte(`{"type":"string"}`)}},
	}}
	m, err := kube.StartModule(context.Background(), kube.ModuleConfig{
		Name: "steady-catalog", Version: "1.0.0", Addr: "10.2.3.5:8483", Identity: "steady-catalog-0",
		Namespace: ns, Config: cfg, Components: comps,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cat := openCatalog(t, cfg, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const want = `[{"name":"echo","description":"answers","tags":["original"],"ports":[{"name":"in","schema":"eyJ0eXBlIjoic3RyaW5nIn0="}]}]`
	testkit.WaitUntil(t, "the leader to publish", func() bool {
		in, err := cat.Get(ctx, "steady-catalog")
		return m.IsLeader() && err == nil && string(in.Components) == want
	})

	// The caller reuses its slice...
	comps[0].Tags[0] = "mutated"
	comps[0].Ports[0].Schema[2] = 'X'
	comps[0] = v1alpha1.TinyModuleComponentStatus{Name: "other"}
	// ...and the leader publishes again (its status was overwritten).
	if err := m.Catalog().SetStatus(ctx, "steady-catalog", v1alpha1.TinyModuleStatus{Addr: "10.9.9.9:1", Version: "0.0.0"}); err != nil {
		t.Fatal(err)
	}
	var in switchboard.Instance
	testkit.WaitUntil(t, "the leader to restore its status", func() bool {
		in, err = cat.Get(ctx, "steady-catalog")
		return err == nil && in.Version == "1.0.0"
	})
	if string(in.Components) != want {
		t.Fatalf("published components %s, want those StartModule was given: %s", in.Components, want)
	}
}
