package discovery

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// failingCatalog's Watch always fails with err, and counts its calls.
type failingCatalog struct {
	switchboard.Catalog
	err   error
	calls chan struct{}
}

func (c *failingCatalog) Watch(context.Context, switchboard.Query) (<-chan switchboard.Event, error) {
	c.calls <- struct{}{}
	return nil, c.err
}

// A catalog that says it is closed ends the cache's watching again; any
// other error is retried, stale with that error, until the cache's context
// ends.
func TestRewatchStopsOnClosedCatalog(t *testing.T) {
	for _, closed := range []bool{true, false} {
		cat := &failingCatalog{err: errors.New("dial tcp: connection refused"), calls: make(chan struct{}, 16)}
		if closed {
			cat.err = switchboard.ErrClosed
		}
		c := &Cache{opts: Options{Logger: slog.New(slog.DiscardHandler)}, cat: cat, w: newWriter()}
		c.snap.Store(c.w.snapshot())
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan (<-chan switchboard.Event), 1)
		go func() { got <- c.rewatch(ctx) }()
		wait := func(what string) {
			t.Helper()
			select {
			case <-cat.calls:
			case <-time.After(20 * time.Second):
				t.Fatalf("closed=%v: no %s", closed, what)
			}
		}
		wait("first watch")
		if !closed {
			wait("second watch after a failed one")
			if _, err := c.Stale(); !errors.Is(err, cat.err) {
				t.Errorf("stale error while watching again = %v, want %v", err, cat.err)
			}
			cancel()
		}
		select {
		case ch := <-got:
			if ch != nil {
				t.Fatalf("closed=%v: rewatch returned a stream", closed)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("closed=%v: rewatch went on", closed)
		}
		cancel()
	}
}
