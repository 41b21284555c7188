package hub

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// apartSource is a catalog whose revisions are not its log positions, as
// kube://'s: the rows carry the API server's resourceVersions, the log is
// numbered from 1 by the reader, and deletions and reads say their
// revisions.
type apartSource struct {
	mu   sync.Mutex
	rows map[string]switchboard.Instance
	log  []Change
	rev  int64 // the highest revision written
	gone bool  // the next ChangesSince answers ErrCursorGone
}

// write upserts id at the next revision and logs it unless quiet.
func (a *apartSource) write(id string, quiet bool) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rev++
	in := inst(id, time.Minute)
	in.LastSeen, in.Revision = time.Now(), a.rev
	a.rows[id] = in
	if !quiet {
		a.log = append(a.log, Change{Seq: int64(len(a.log)) + 1, ID: id})
	}
	return a.rev
}

// remove deletes id at the next revision and logs it unless quiet.
func (a *apartSource) remove(id string, quiet bool) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rev++
	delete(a.rows, id)
	if !quiet {
		a.log = append(a.log, Change{Seq: int64(len(a.log)) + 1, ID: id, Deleted: true,
			Reason: switchboard.ReasonDeregistered, Revision: a.rev})
	}
	return a.rev
}

func (a *apartSource) Snapshot(context.Context) (Snapshot, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Snapshot{Seq: int64(len(a.log)), Revision: a.rev, Now: time.Now()}
	for _, in := range a.rows {
		s.Instances = append(s.Instances, in)
	}
	return s, nil
}

func (a *apartSource) ChangesSince(_ context.Context, cur Cursor) (Batch, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gone {
		a.gone = false
		return Batch{}, ErrCursorGone
	}
	b := Batch{Seq: int64(len(a.log)), Revision: a.rev, Now: time.Now()}
	for _, c := range a.log[min(cur.Seq, int64(len(a.log))):] {
		if !c.Deleted {
			c.Instance, c.Found = a.rows[c.ID]
		}
		b.Changes = append(b.Changes, c)
	}
	return b, nil
}

func (a *apartSource) RenewedSince(context.Context, time.Time) ([]Renewal, time.Time, error) {
	return nil, time.Now(), nil
}

// A source whose revisions (here from 1000 on) lie far above its log
// positions (from 1): deletions are judged by their own revisions, so they
// apply, a re-creation in the same read survives its deletion, a snapshot
// after a trimmed log removes what it no longer holds, and tombstones go
// as the reads pass them.
func TestRevisionsApartFromPositions(t *testing.T) {
	a := &apartSource{rows: map[string]switchboard.Instance{}, rev: 1000}
	h := New(a, Options{})
	defer h.Close()
	a.write("a", true)
	rb := a.write("b", true)
	ch, err := h.Watch(context.Background(), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if ev := next(t, ch); ev.Kind != switchboard.EventAdded {
			t.Fatalf("snapshot: %+v", ev)
		}
	}
	ra := a.remove("a", false)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "a" || ev.Revision != ra {
		t.Fatalf("deletion of a at revision %d: got %s %s at %d", ra, ev.Kind, ev.Instance.ID, ev.Revision)
	}
	// b deleted and created again, read in one batch.
	a.remove("b", false)
	rb2 := a.write("b", false)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "b" || ev.Revision <= rb {
		t.Fatalf("deletion of b (held at %d): got %s %s at %d", rb, ev.Kind, ev.Instance.ID, ev.Revision)
	}
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "b" || ev.Revision != rb2 {
		t.Fatalf("b created again at %d: got %s %s at %d", rb2, ev.Kind, ev.Instance.ID, ev.Revision)
	}
	// c comes through the log, then leaves while the log is trimmed.
	a.write("c", false)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.ID != "c" {
		t.Fatalf("c: got %+v", ev)
	}
	a.mu.Lock()
	a.gone = true
	a.mu.Unlock()
	a.remove("c", true)
	h.Notify()
	if ev := next(t, ch); ev.Kind != switchboard.EventRemoved || ev.Instance.ID != "c" || ev.Reason != switchboard.ReasonUnknown {
		t.Fatalf("c gone from the snapshot after a trimmed log: got %s %s %s", ev.Kind, ev.Instance.ID, ev.Reason)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.tombs) != 0 {
		t.Fatalf("tombstones left after every read passed them: %v", h.tombs)
	}
}
