package resolver_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	grpcresolver "google.golang.org/grpc/resolver"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/resolver"
)

// fakeCatalog hands out watch channels the test feeds by hand, recording
// the query of each.
type fakeCatalog struct {
	switchboard.Catalog
	watches chan fakeWatch
}

type fakeWatch struct {
	q  switchboard.Query
	ch chan switchboard.Event
}

func (c *fakeCatalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	w := fakeWatch{q: q, ch: make(chan switchboard.Event, 16)}
	c.watches <- w
	return w.ch, nil
}

// fakeCC records the address lists the resolver pushes.
type fakeCC struct {
	grpcresolver.ClientConn
	states chan []string
}

func (f *fakeCC) UpdateState(s grpcresolver.State) error {
	var addrs []string
	for _, e := range s.Endpoints {
		addrs = append(addrs, e.Addresses[0].Addr)
	}
	f.states <- addrs
	return nil
}

func (f *fakeCC) ReportError(error) {}

func next(t *testing.T, f *fakeCC) []string {
	t.Helper()
	select {
	case s := <-f.states:
		return s
	case <-time.After(waitFor):
		t.Fatal("no state pushed")
		return nil
	}
}

func noState(t *testing.T, f *fakeCC) {
	t.Helper()
	select {
	case s := <-f.states:
		t.Fatalf("unexpected state %v", s)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestResolverWatchSemantics(t *testing.T) {
	cat := &fakeCatalog{watches: make(chan fakeWatch, 4)}
	cc := &fakeCC{states: make(chan []string, 16)}
	b := resolver.NewBuilder(cat, resolver.Options{Logger: quiet})
	r, err := b.Build(grpcresolver.Target{URL: url.URL{Scheme: "switchboard", Path: "/storage"}}, cc, grpcresolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ws := map[string]fakeWatch{}
	for i := 0; i < 2; i++ {
		w := <-cat.watches
		if w.q.Capability == "storage" {
			ws["cap"] = w
		} else if w.q.Name == "storage" {
			ws["name"] = w
		} else {
			t.Fatalf("unexpected query %+v", w.q)
		}
	}
	in := func(id, addr string) switchboard.Instance {
		return switchboard.Instance{ID: id, Name: "svc", Address: addr}
	}
	ws["cap"].ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in("a", "10.0.0.1:1")}
	ws["cap"].ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in("n", "nats://x.y")}
	ws["cap"].ch <- switchboard.Event{Kind: switchboard.EventSynced}
	noState(t, cc) // the name watch has not synced yet
	ws["name"].ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in("b", "10.0.0.2:1")}
	ws["name"].ch <- switchboard.Event{Kind: switchboard.EventSynced}
	if s := next(t, cc); !slices.Equal(s, []string{"10.0.0.1:1", "10.0.0.2:1"}) {
		t.Fatalf("initial state %v", s)
	}
	// An outage keeps everything.
	ws["cap"].ch <- switchboard.Event{Kind: switchboard.EventError, Err: errors.New("down")}
	noState(t, cc)
	// Removal drops at once.
	ws["cap"].ch <- switchboard.Event{Kind: switchboard.EventRemoved, Reason: switchboard.ReasonExpired, Instance: in("a", "10.0.0.1:1")}
	if s := next(t, cc); !slices.Equal(s, []string{"10.0.0.2:1"}) {
		t.Fatalf("after removal %v", s)
	}
	// The name watch ends: re-watched; its new snapshot replaces the old.
	close(ws["name"].ch)
	w := <-cat.watches
	if w.q.Name != "storage" {
		t.Fatalf("re-watch query %+v", w.q)
	}
	w.ch <- switchboard.Event{Kind: switchboard.EventAdded, Instance: in("c", "10.0.0.3:1")}
	w.ch <- switchboard.Event{Kind: switchboard.EventSynced}
	if s := next(t, cc); !slices.Equal(s, []string{"10.0.0.3:1"}) {
		t.Fatalf("after re-watch %v", s)
	}
}

func TestBuildRejectsBadTargets(t *testing.T) {
	b := resolver.NewBuilder(&fakeCatalog{watches: make(chan fakeWatch, 4)}, resolver.Options{Logger: quiet})
	for _, p := range []string{"/", "/a b", "/-x"} {
		if _, err := b.Build(grpcresolver.Target{URL: url.URL{Scheme: "switchboard", Path: p}}, &fakeCC{}, grpcresolver.BuildOptions{}); err == nil {
			t.Errorf("Build accepted %q", p)
		}
	}
	if b.Scheme() != "switchboard" || resolver.Target("x") != "switchboard:///x" {
		t.Fatal("scheme")
	}
}
