package remote

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// FuzzSSEStream feeds arbitrary bytes to the watch stream parser: it never
// panics, never hangs, and never reports a removal or update of an instance
// it did not first report added.
func FuzzSSEStream(f *testing.F) {
	for _, s := range []string{
		"retry: 1000\n\nevent: snapshot\ndata: {\"event\":\"snapshot\",\"fresh\":false,\"instances\":1}\n\nevent: added\ndata: {\"event\":\"added\",\"instance\":{\"id\":\"a\",\"name\":\"a\",\"ttl\":\"10s\"}}\n\nid: e-1\nevent: synced\ndata: {\"event\":\"synced\"}\n\n",
		"id: e-2\nevent: removed\ndata: {\"event\":\"removed\",\"reason\":\"expired\",\"instance\":{\"id\":\"a\"}}\n\n",
		"event: error\ndata: {\"event\":\"error\",\"error\":\"down\"}\n\n: keep-alive\n\n",
		"event: updated\r\ndata: {\"instance\":{\"id\":\"x\",\"registered_at\":\"bad\"}}\r\n\r\n",
		"data: x\n\n", "event:\n\n", "id\n", ":\n", "event: added\ndata: {\"instance\":null}\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := &Client{log: slog.New(slog.DiscardHandler)}
		w := &watch{c: c, ctx: ctx, out: make(chan switchboard.Event), known: map[string]switchboard.Instance{}}
		shown := map[string]bool{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.out {
				switch ev.Kind {
				case switchboard.EventAdded:
					if shown[ev.Instance.ID] {
						t.Errorf("duplicate added %q", ev.Instance.ID)
					}
					shown[ev.Instance.ID] = true
				case switchboard.EventUpdated, switchboard.EventRemoved:
					if !shown[ev.Instance.ID] {
						t.Errorf("%s of %q, never added", ev.Kind, ev.Instance.ID)
					}
					if ev.Kind == switchboard.EventRemoved {
						delete(shown, ev.Instance.ID)
					}
				}
			}
		}()
		w.read(strings.NewReader(stream), nil)
		close(w.out)
		<-done
	})
}
