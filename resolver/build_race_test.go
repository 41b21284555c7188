package resolver_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/resolver"
)

// TestBuildRacesCachePublications builds resolvers while the cache keeps
// publishing (going stale and fresh again). The subscription's callback
// may run while Build is still counting the snapshot: Build must neither
// block on the wake-up slot the callback has already filled (it hung
// forever), nor write what the callback reads without the resolver's lock
// (go test -race), and every resolver still pushes its first set.
func TestBuildRacesCachePublications(t *testing.T) {
	// A large snapshot makes Build's counting take a while, so
	// publications land in it.
	snap := make([]switchboard.Instance, 0, 500)
	for i := range cap(snap) {
		snap = append(snap, byCap(fmt.Sprint("i", i), "storage", fmt.Sprintf("10.0.%d.%d:1", i/250, i%250)))
	}
	cache, cat := newCache(t)
	for _, in := range snap {
		cat.send(added(in))
	}
	testkit.WaitUntil(t, "the cache to hold the snapshot", func() bool {
		return cache.Count(switchboard.Query{Capability: "storage"}) == len(snap)
	})
	b := resolver.NewBuilder(cache, resolver.Options{Logger: quiet})

	published := make(chan struct{}, 1)
	defer cache.Subscribe(func() {
		select {
		case published <- struct{}{}:
		default:
		}
	})()
	stop, pumped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(pumped)
		for i := 0; ; i++ {
			ev := switchboard.Event{Kind: switchboard.EventSynced}
			if i%2 == 0 {
				ev = switchboard.Event{Kind: switchboard.EventError, Err: errDown}
			}
			cat.send(ev) // alone in its burst: one publication each
			select {
			case <-stop:
				return
			case <-published:
			}
		}
	}()
	defer func() { close(stop); <-pumped }()

	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		cc := newCC(t)
		built := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(built)
			build(t, b, "storage", cc)
		}()
		select {
		case <-built:
		case <-time.After(waitFor):
			t.Fatalf("Build %d blocked while the cache published", i)
		}
		select {
		case s := <-cc.states:
			if len(s) != len(snap) {
				t.Fatalf("resolver %d pushed %d addresses, want %d", i, len(s), len(snap))
			}
		case err := <-cc.errs:
			t.Fatalf("resolver %d reported %v", i, err)
		case <-time.After(waitFor):
			t.Fatalf("resolver %d pushed nothing", i)
		}
	}
	wg.Wait()
}
