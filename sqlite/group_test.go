package sqlite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// holdWriteLock takes c's process write lock (its semaphore and the file
// lock), so the group commits of c queue behind it until the returned
// function is called.
func holdWriteLock(t *testing.T, c *Catalog) (release func()) {
	t.Helper()
	unlock, err := c.d.wlock.lock(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(unlock) }
	t.Cleanup(release)
	return release
}

// waitPending waits until n ops are queued on c.
func waitPending(t *testing.T, c *Catalog, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang bound, not a speed assertion
	for {
		c.wq.mu.Lock()
		got := len(c.wq.pending)
		c.wq.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ops queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// eventLog records every event of a watch after its first synced, as
// "kind:id".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func watchEvents(t *testing.T, c *Catalog) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := c.Watch(ctx, switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	l := &eventLog{}
	synced := make(chan struct{})
	go func() {
		isSynced := false
		for ev := range ch {
			if ev.Kind == switchboard.EventSynced {
				if !isSynced {
					isSynced = true
					close(synced)
				}
				continue
			}
			if !isSynced {
				continue // the snapshot
			}
			l.mu.Lock()
			l.events = append(l.events, string(ev.Kind)+":"+ev.Instance.ID)
			l.mu.Unlock()
		}
	}()
	select {
	case <-synced:
	case <-time.After(time.Minute):
		t.Fatal("watch never synced")
	}
	return l
}

// waitFor waits until the log holds want (in any order), then checks it
// holds nothing else, even a little later.
func (l *eventLog) waitFor(t *testing.T, who string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	get := func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		return slices.Sorted(slices.Values(l.events))
	}
	deadline := time.Now().Add(time.Minute)
	for !slices.Equal(get(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s saw %v\nwant %v", who, get(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if got := get(); !slices.Equal(got, want) {
		t.Fatalf("%s saw %v afterwards\nwant %v", who, got, want)
	}
}

// One op that fails inside the group's transaction (after it wrote its
// row) is rolled back alone: the other ops of the same group commit, each
// logged once, watchers of this and another handle see each exactly once,
// and nothing of the failed op is stored. Input that fails validation never
// reaches a group.
func TestGroupOneFailingOp(t *testing.T) {
	c, path := newFile(t)
	ctx := tctx(t)
	mustRegister(t, c, sample("gone"))
	mustRegister(t, c, sample("renewed"))
	// The failing op: its log insert is refused, after its instance and
	// capability rows were written in the same transaction.
	if _, err := c.d.wdb.ExecContext(ctx, `CREATE TEMP TRIGGER refuse BEFORE INSERT ON changes
		WHEN NEW.id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`); err != nil {
		t.Fatal(err)
	}
	other := openFile(t, path)
	here, there := watchEvents(t, c), watchEvents(t, other)
	logBefore := len(changeLog(t, c))

	release := holdWriteLock(t, c)
	const good = 12
	type result struct {
		what string
		err  error
	}
	results := make(chan result, good+4)
	var wg sync.WaitGroup
	for i := range good {
		wg.Go(func() {
			_, err := c.Register(ctx, sample(fmt.Sprintf("ok-%02d", i)))
			results <- result{fmt.Sprint("ok-", i), err}
		})
	}
	wg.Go(func() {
		_, err := c.Register(ctx, sample("bad"))
		results <- result{"bad", err}
	})
	wg.Go(func() {
		results <- result{"deregister gone", c.Deregister(ctx, "gone")}
	})
	wg.Go(func() {
		results <- result{"deregister missing", c.Deregister(ctx, "missing")}
	})
	wg.Go(func() {
		missing, err := c.Heartbeat(ctx, "renewed", "nobody")
		if err == nil && !slices.Equal(missing, []string{"nobody"}) {
			err = fmt.Errorf("missing %v, want [nobody]", missing)
		}
		results <- result{"heartbeat", err}
	})
	// Over the limit: rejected before it is queued.
	tooMany := sample("too-many")
	for i := range switchboard.MaxCapabilities + 1 {
		tooMany.Capabilities = append(tooMany.Capabilities, fmt.Sprint("c", i))
	}
	if _, err := c.Register(ctx, tooMany); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("over the capability limit: %v", err)
	}
	waitPending(t, c, good+4) // all in the queue: the next group takes them all
	release()
	wg.Wait()
	close(results)
	for r := range results {
		switch r.what {
		case "bad":
			if r.err == nil || !strings.Contains(r.err.Error(), "refused by the test") {
				t.Errorf("the failing op: %v", r.err)
			}
		case "deregister missing":
			if !errors.Is(r.err, switchboard.ErrNotFound) {
				t.Errorf("deregister of a missing id: %v", r.err)
			}
		default:
			if r.err != nil {
				t.Errorf("%s: %v", r.what, r.err)
			}
		}
	}

	for _, id := range []string{"bad", "gone", "too-many"} {
		if _, err := c.Get(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("%s: %v, want not found", id, err)
		}
	}
	var caps int
	if err := c.d.rdb.QueryRowContext(ctx, `SELECT count(*) FROM instance_capabilities WHERE instance_id IN ('bad', 'gone')`).Scan(&caps); err != nil || caps != 0 {
		t.Errorf("capability rows of bad and gone: %d, %v", caps, err)
	}
	var ok string
	if err := c.d.rdb.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q, %v", ok, err)
	}
	var want []string
	wantLog := map[string]bool{"delete:gone:deregistered": true}
	for i := range good {
		id := fmt.Sprintf("ok-%02d", i)
		got, err := c.Get(ctx, id)
		if err != nil || !slices.Equal(got.Capabilities, sample(id).Capabilities) || got.Metadata["zone"] != "a" {
			t.Errorf("%s: %+v, %v", id, got, err)
		}
		want = append(want, "added:"+id)
		wantLog["upsert:"+id+":"] = true
	}
	want = append(want, "removed:gone")
	log := changeLog(t, c)[logBefore:]
	if len(log) != len(wantLog) {
		t.Errorf("log after the group: %v", log)
	}
	for _, e := range log {
		if !wantLog[e] {
			t.Errorf("unexpected log entry %s", e)
		}
		delete(wantLog, e)
	}
	here.waitFor(t, "the watcher of this handle", want)
	there.waitFor(t, "the watcher of another handle", want)
}

// A queued op whose context ends returns at once with its error and is
// never written; the others, the leader's included, commit. A leader whose
// context ends while it waits for the lock passes the lead on.
func TestGroupCancelQueued(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	release := holdWriteLock(t, c)
	errs := make(chan error, 4)
	go func() { _, err := c.Register(ctx, sample("first")); errs <- err }()
	waitPending(t, c, 1)
	qctx, cancel := context.WithCancel(ctx)
	go func() { _, err := c.Register(qctx, sample("cancelled")); errs <- err }()
	waitPending(t, c, 2)
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued op: %v", err)
	}
	waitPending(t, c, 1)
	release()
	if err := <-errs; err != nil {
		t.Fatalf("leader: %v", err)
	}
	if _, err := c.Get(ctx, "cancelled"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("the cancelled op was written: %v", err)
	}

	// Now the leader is the one cancelled.
	release = holdWriteLock(t, c)
	lctx, cancelLeader := context.WithCancel(ctx)
	go func() { errs <- c.Deregister(lctx, "first") }()
	waitPending(t, c, 1)
	go func() { _, err := c.Register(ctx, sample("second")); errs <- err }()
	waitPending(t, c, 2)
	cancelLeader()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled leader: %v", err)
	}
	release()
	if err := <-errs; err != nil {
		t.Fatalf("the op after a cancelled leader: %v", err)
	}
	for _, id := range []string{"first", "second"} {
		if _, err := c.Get(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if got, want := strings.Join(changeLog(t, c), " "), "upsert:first: upsert:second:"; got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
}

// Close while ops are queued: each returns (none hangs), with ErrClosed
// unless it committed, and exactly the ones that returned nil are stored.
func TestGroupClosePending(t *testing.T) {
	c, path := newFile(t)
	ctx := tctx(t)
	release := holdWriteLock(t, c)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = c.Register(ctx, sample(fmt.Sprint("q", i))) })
	}
	waitPending(t, c, n)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	// The queued ops fail at once; the leader waits for the lock.
	deadline := time.Now().Add(time.Minute)
	for {
		c.wq.mu.Lock()
		left := len(c.wq.pending)
		c.wq.mu.Unlock()
		if left <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ops still queued after Close", left)
		}
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	var stored []string
	for i, err := range errs {
		switch {
		case err == nil:
			stored = append(stored, fmt.Sprint("q", i))
		case !errors.Is(err, switchboard.ErrClosed):
			t.Errorf("q%d: %v, want ErrClosed or success", i, err)
		}
	}
	if _, err := c.Register(ctx, sample("late")); !errors.Is(err, switchboard.ErrClosed) {
		t.Fatalf("register after Close: %v", err)
	}
	r := openFile(t, path)
	got, err := r.List(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range got {
		ids = append(ids, in.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, stored) {
		t.Fatalf("stored %v, but these returned nil: %v", ids, stored)
	}
}

// Many writers of one handle, with watchers of this and another handle:
// every write is logged once, and each watcher ends with exactly the
// registered set, having seen each instance added at most once (an instance
// added and removed between two of a watcher's log reads may be skipped as
// a pair: the log is joined with the rows as they are now).
func TestGroupConcurrentWriters(t *testing.T) {
	c, path := newFile(t)
	ctx := tctx(t)
	other := openFile(t, path)
	here, there := watchEvents(t, c), watchEvents(t, other)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%02d", w, i)
				if _, err := c.Register(ctx, sample(id)); err != nil {
					t.Error(err)
					return
				}
				if i%5 == 4 {
					if err := c.Deregister(ctx, id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	var want []string
	logged := 0
	for w := range writers {
		for i := range each {
			logged++
			if i%5 == 4 {
				logged++
				continue
			}
			want = append(want, fmt.Sprintf("w%d-%02d", w, i))
		}
	}
	log := changeLog(t, c)
	if len(log) != logged {
		t.Fatalf("%d log entries, want %d", len(log), logged)
	}
	seen := map[string]bool{}
	for _, e := range log {
		if seen[e] {
			t.Fatalf("logged twice: %s", e)
		}
		seen[e] = true
	}
	here.waitForSet(t, "the watcher of this handle", want)
	there.waitForSet(t, "the watcher of another handle", want)
}

// waitForSet waits until the events added exactly want and checks that no
// instance was added twice or removed without having been added.
func (l *eventLog) waitForSet(t *testing.T, who string, want []string) {
	t.Helper()
	state := func() (set []string, bad string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		in := map[string]bool{}
		added := map[string]bool{}
		for _, e := range l.events {
			kind, id, _ := strings.Cut(e, ":")
			switch kind {
			case "added":
				if added[id] {
					return nil, "added twice: " + id
				}
				added[id], in[id] = true, true
			case "removed":
				if !in[id] {
					return nil, "removed but not added: " + id
				}
				delete(in, id)
			default:
				return nil, "unexpected " + e
			}
		}
		for id := range in {
			set = append(set, id)
		}
		slices.Sort(set)
		return set, ""
	}
	deadline := time.Now().Add(time.Minute)
	for {
		set, bad := state()
		if bad != "" {
			t.Fatalf("%s: %s", who, bad)
		}
		if slices.Equal(set, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %v\nwant %v", who, set, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A group whose logged entries are not all reported (a heartbeat reviving
// a stale row is logged by a trigger) hands the hub only the leading run
// without a gap; the rest is read from the log.
func TestContiguous(t *testing.T) {
	seqs := func(ch []hub.Change) (out []int64) {
		for _, c := range ch {
			out = append(out, c.Seq)
		}
		return out
	}
	for _, tc := range []struct{ in, want []int64 }{
		{[]int64{5}, []int64{5}},
		{[]int64{5, 6, 7}, []int64{5, 6, 7}},
		{[]int64{5, 7, 8}, []int64{5}},
		{[]int64{5, 6, 8}, []int64{5, 6}},
	} {
		var in []hub.Change
		for _, s := range tc.in {
			in = append(in, hub.Change{Seq: s})
		}
		if got := seqs(contiguous(in)); !slices.Equal(got, tc.want) {
			t.Errorf("contiguous(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// A revival logged by the trigger in the same group as a reported change,
// before or after it: the watcher gets both.
func TestGroupRevivalBesideChange(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	short := sample("short")
	// Long enough that the revived row is not stale again by the time the
	// watcher reads it on a loaded machine.
	short.TTL = 2 * time.Second
	mustRegister(t, c, short)
	l := watchEvents(t, c)
	for _, order := range []string{"heartbeat first", "register first"} {
		// short expires (its row stale, the watcher told), then one
		// group revives it and adds another.
		l.waitForSubset(t, order, []string{"removed:short"})
		l.mu.Lock()
		l.events = nil
		l.mu.Unlock()
		release := holdWriteLock(t, c)
		errs := make(chan error, 2)
		hb := func() {
			missing, err := c.Heartbeat(ctx, "short")
			if err == nil && len(missing) > 0 {
				err = fmt.Errorf("missing %v", missing)
			}
			errs <- err
		}
		id := strings.ReplaceAll(order, " ", "-")
		reg := func() { _, err := c.Register(ctx, sample(id)); errs <- err }
		first, second := hb, reg
		if order == "register first" {
			first, second = reg, hb
		}
		go first()
		waitPending(t, c, 1)
		go second()
		waitPending(t, c, 2)
		release()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		l.waitForSubset(t, order, []string{"added:" + id, "added:short"})
	}
}

// waitForSubset waits until every entry of want has been seen.
func (l *eventLog) waitForSubset(t *testing.T, who string, want []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l.mu.Lock()
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(l.events, w) })
		l.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never saw %v", who, missing)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
