package testkit

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// WatchSet applies a watch's events to the set of instances a watcher
// believes in (id → instance), so a test can compare it with the catalog.
type WatchSet struct {
	mu     sync.Mutex
	set    map[string]switchboard.Instance
	synced bool
	errs   int
}

// NewWatchSet consumes ch in a goroutine of its own until ch is closed.
func NewWatchSet(ch <-chan switchboard.Event) *WatchSet {
	w := &WatchSet{set: map[string]switchboard.Instance{}}
	go func() {
		for ev := range ch {
			w.mu.Lock()
			switch ev.Kind {
			case switchboard.EventAdded, switchboard.EventUpdated:
				w.set[ev.Instance.ID] = ev.Instance
			case switchboard.EventRemoved:
				delete(w.set, ev.Instance.ID)
			case switchboard.EventSynced:
				w.synced = true
			case switchboard.EventError:
				w.errs++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// IDs returns the ids the watcher believes in, sorted, joined by spaces.
func (w *WatchSet) IDs() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := slices.Collect(maps.Keys(w.set))
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

// Synced reports whether the initial snapshot has been delivered.
func (w *WatchSet) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

// Get returns the instance the watcher holds for id.
func (w *WatchSet) Get(id string) (switchboard.Instance, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	in, ok := w.set[id]
	return in, ok
}

// JoinIDs returns the ids of ins, sorted, joined by spaces (the form IDs
// returns).
func JoinIDs(ins []switchboard.Instance) string {
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

// WaitForSet waits until the watcher believes in exactly want() (ids as
// JoinIDs gives them), re-evaluating want each time.
func (w *WatchSet) WaitForSet(t testing.TB, what string, want func() string) {
	t.Helper()
	var last, got string
	defer func() {
		if t.Failed() {
			t.Logf("watcher: %q\ncatalog: %q", got, last)
		}
	}()
	WaitUntil(t, what, func() bool {
		last, got = want(), w.IDs()
		return last == got
	})
}
