package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// outOfOrderFor is how long TestOutOfOrderCommits writes.
const outOfOrderFor = 60 * time.Second

// TestOutOfOrderCommits: for a minute, writers draw their seqs and then
// hold their transactions a random while before committing, so commits
// land out of seq order all the time, and now and then one rolls back;
// two watchers in other handles resync every second meanwhile. No
// watcher may ever see an instance's revision go back, and each must end
// with exactly the catalog's rows at their revisions.
func TestOutOfOrderCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of writes; -short skips it")
	}
	dsn := pgtest.Schema(t, testDSN)
	type watched struct {
		mu   sync.Mutex
		set  map[string]int64
		last map[string]int64
		back []string
	}
	var watchers []*watched
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		c := openDSN(t, dsn, switchboard.Options{PollInterval: time.Second})
		ch, err := c.Watch(ctx, switchboard.Query{})
		if err != nil {
			t.Fatal(err)
		}
		w := &watched{set: map[string]int64{}, last: map[string]int64{}}
		watchers = append(watchers, w)
		go func() {
			for ev := range ch {
				id := ev.Instance.ID
				w.mu.Lock()
				switch ev.Kind {
				case switchboard.EventAdded, switchboard.EventUpdated, switchboard.EventRemoved:
					if ev.Revision < w.last[id] {
						w.back = append(w.back, fmt.Sprintf("%s %s at %d after %d", id, ev.Kind, ev.Revision, w.last[id]))
					}
					w.last[id] = ev.Revision
					if ev.Kind == switchboard.EventRemoved {
						delete(w.set, id)
					} else {
						w.set[id] = ev.Instance.Revision
					}
				}
				w.mu.Unlock()
			}
		}()
	}

	var wg sync.WaitGroup
	deadline := time.Now().Add(outOfOrderFor)
	var commits, rollbacks sync.Map
	for n := range 6 {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			rng := rand.New(rand.NewPCG(uint64(n), 45))
			done, undone := 0, 0
			for time.Now().Before(deadline) {
				id := fmt.Sprintf("i%d", rng.IntN(12))
				commit := rng.IntN(20) != 0
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					var logged bool
					if rng.IntN(4) == 0 {
						tag, err := tx.Exec(ctx, `DELETE FROM instances WHERE id = $1`, id)
						if err != nil {
							return err
						}
						if logged = tag.RowsAffected() == 1; logged {
							_, err = tx.Exec(ctx, `INSERT INTO changes (id, op, reason) VALUES ($1, 'delete', 'deregistered')`, id)
						}
						if err != nil {
							return err
						}
					} else {
						if _, err := tx.Exec(ctx, `INSERT INTO instances (id, name, type, address, ttl) VALUES ($1, 'svc', 'writer', $2, interval '1 hour')
							ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, last_seen = now()`, id, fmt.Sprintf("h:%d", rng.IntN(1000))); err != nil {
							return err
						}
						if _, err := tx.Exec(ctx, `INSERT INTO changes (id, op) VALUES ($1, 'upsert')`, id); err != nil {
							return err
						}
						logged = true
					}
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // others commit meanwhile
					if logged && commit {
						_, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, Channel)
						return err
					}
					if !commit {
						return errRollback
					}
					return nil
				})
				switch {
				case err == errRollback:
					undone++
				case err != nil:
					t.Error(err)
					return
				default:
					done++
				}
			}
			commits.Store(n, done)
			rollbacks.Store(n, undone)
		})
	}
	wg.Wait()
	total, back := 0, 0
	commits.Range(func(_, v any) bool { total += v.(int); return true })
	rollbacks.Range(func(_, v any) bool { back += v.(int); return true })

	reader := openDSN(t, dsn, switchboard.Options{})
	rows, err := reader.List(context.Background(), switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, in := range rows {
		want[in.ID] = in.Revision
	}
	for i, w := range watchers {
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			w.mu.Lock()
			equal := len(w.set) == len(want)
			for id, rev := range want {
				equal = equal && w.set[id] == rev
			}
			back, got := w.back, fmt.Sprint(w.set)
			w.mu.Unlock()
			if len(back) > 0 {
				t.Fatalf("watcher %d went back in time %d times: %v", i, len(back), back[:min(len(back), 5)])
			}
			if equal {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("watcher %d ends with %s; the catalog holds %v", i, got, want)
			}
		}
	}
	t.Logf("%d commits and %d rollbacks out of seq order over %v: 0 regressions, 0 divergences", total, back, outOfOrderFor)
}

var errRollback = fmt.Errorf("rolled back on purpose")
