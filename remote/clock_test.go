package remote_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/remote"
)

// skewed is a catalog whose clock runs ahead of this process's by d: it
// stamps every time it returns, and tells the time, d later (a database
// host whose clock is off).
type skewed struct {
	switchboard.Catalog
	d time.Duration
}

func (s skewed) shift(in switchboard.Instance) switchboard.Instance {
	in.RegisteredAt, in.LastSeen = in.RegisteredAt.Add(s.d), in.LastSeen.Add(s.d)
	return in
}

func (s skewed) Now(ctx context.Context) (time.Time, error) {
	now, err := s.Catalog.Now(ctx)
	return now.Add(s.d), err
}

func (s skewed) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	out, err := s.Catalog.Register(ctx, in)
	return s.shift(out), err
}

func (s skewed) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	out, err := s.Catalog.Get(ctx, id)
	return s.shift(out), err
}

func (s skewed) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	out, err := s.Catalog.List(ctx, q)
	for i := range out {
		out[i] = s.shift(out[i])
	}
	return out, err
}

func (s skewed) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	in, err := s.Catalog.Watch(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make(chan switchboard.Event)
	go func() {
		defer close(out)
		for ev := range in {
			ev.Instance = s.shift(ev.Instance)
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestFreshSnapshotDiffReportsExpiry: an instance that expired while the
// watcher was disconnected, past the server's history, is removed as
// expired, one deregistered meanwhile as deregistered — judged by the
// catalog's clock, which stamped LastSeen, not by this process's: with the
// catalog an hour ahead, an expired instance read by the local clock
// looked live (so "deregistered"), and an hour behind, every removal
// looked "expired".
func TestFreshSnapshotDiffReportsExpiry(t *testing.T) {
	for _, skew := range []time.Duration{0, time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			cat := skewed{testkit.OpenSQLite(t), skew}
			url, _ := serve(t, cat, httpapi.Options{History: 1})
			p := testkit.NewProxy(t, strings.TrimPrefix(url, "http://"))
			writer := client(t, url, remote.Config{})
			watcher := client(t, "http://"+p.Addr(), remote.Config{})
			mortal := inst("mortal")
			mortal.TTL = 400 * time.Millisecond
			mustRegister(t, writer, mortal)
			leaving := mustRegister(t, writer, inst("leaving"))
			w := watchAll(t, watcher)
			if got := w.untilSynced(); len(got) != 2 {
				t.Fatalf("snapshot: %v", got)
			}
			p.CutAll()
			if err := writer.Deregister(context.Background(), leaving.ID); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, writer, inst("x"))
			mustRegister(t, writer, inst("y"))
			testkit.WaitUntil(t, "mortal to expire", func() bool {
				got, _ := writer.List(context.Background(), switchboard.Query{Name: "mortal"})
				return len(got) == 0
			})
			p.Restore()
			// leaving's removal cannot be told from a snapshot (unknown);
			// mortal was past its TTL by the catalog's clock (expired).
			want := []string{"added/ x", "added/ y", "removed/expired mortal", "removed/unknown leaving"}
			if got := w.untilSynced(); !slices.Equal(got, want) {
				t.Fatalf("diff: %v, want %v", got, want)
			}
		})
	}
}
