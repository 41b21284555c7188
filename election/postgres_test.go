package election

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &testDSN)) }

// killable cuts one contender off the catalog on demand: every call then
// hangs until its context ends, as for a frozen or partitioned process.
type killable struct {
	switchboard.Leaser
	dead atomic.Bool
}

func (k *killable) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if k.dead.Load() {
		<-ctx.Done()
		return switchboard.Lease{}, ctx.Err()
	}
	return k.Leaser.Acquire(ctx, name, holder, ttl)
}

func (k *killable) Renew(ctx context.Context, l switchboard.Lease) (switchboard.Lease, error) {
	if k.dead.Load() {
		<-ctx.Done()
		return switchboard.Lease{}, ctx.Err()
	}
	return k.Leaser.Renew(ctx, l)
}

func (k *killable) Release(ctx context.Context, l switchboard.Lease) error {
	if k.dead.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return k.Leaser.Release(ctx, l)
}

func (k *killable) Leases(ctx context.Context) ([]switchboard.Lease, error) {
	if k.dead.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return k.Leaser.Leases(ctx)
}

type contender struct {
	id     string
	e      *Elector
	k      *killable
	cancel context.CancelFunc
	done   chan struct{}
}

type term struct {
	id    string
	token int64
	at    time.Time
}

// TestChurnOnPostgres runs 5 contenders on a 300 ms lease for 10 s and
// kills the leader again and again, half the time by stopping it (it
// releases), half the time abruptly (its catalog calls hang: it can
// neither renew nor release). There must never be two leaders at once, the
// fencing token must grow with every new leader, and a killed leader must
// be replaced.
func TestChurnOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s churn")
	}
	dsn := pgtest.Schema(t, testDSN)
	d, _ := switchboard.ParseDSN(dsn)
	const (
		contenders = 5
		ttl        = 300 * time.Millisecond
		churn      = 10 * time.Second
	)
	var (
		leaders    atomic.Int32
		violations atomic.Int32
		mu         sync.Mutex
		terms      []term
		elected    = make(chan term, 1024)
	)
	fail := func(format string, args ...any) {
		violations.Add(1)
		t.Errorf(format, args...)
	}
	cfg := Config{
		TTL: ttl,
		// The step-down margin must exceed this machine's worst scheduling
		// delay: with the default (TTL/5 = 60 ms) and a load average of 14 on
		// two cores, one run in twelve saw a late step-down overlap its
		// successor. 150 ms leaves the renewals (every 50 ms) three tries.
		RenewEvery: 50 * time.Millisecond,
		Margin:     150 * time.Millisecond,
		Logger:     quiet,
		OnElected: func(ctx context.Context, l switchboard.Lease) {
			if n := leaders.Add(1); n > 1 {
				fail("%d leaders at once (%s elected with token %d)", n, l.Holder, l.Token)
			}
			mu.Lock()
			if len(terms) > 0 {
				prev := terms[len(terms)-1]
				if l.Token < prev.token || (l.Holder != prev.id && l.Token <= prev.token) {
					fail("token %d for %s after token %d of %s", l.Token, l.Holder, prev.token, prev.id)
				}
			}
			tm := term{l.Holder, l.Token, time.Now()}
			terms = append(terms, tm)
			mu.Unlock()
			elected <- tm
			<-ctx.Done()
		},
		OnLost: func() { leaders.Add(-1) },
	}

	// Five catalog handles (connection pools), shared round-robin by the
	// contenders, so starting a replacement costs no connection set-up.
	cats := make([]*postgres.Catalog, contenders)
	for i := range cats {
		cat, err := postgres.Open(context.Background(), d, switchboard.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cat.Close() })
		cats[i] = cat
	}
	var all []*contender
	seq := 0
	start := func() *contender {
		seq++
		cat := cats[seq%contenders]
		// Long identities: nothing may truncate them into each other.
		id := fmt.Sprintf("%s-%02d", strings.Repeat("switchboard-compactor-7f9c6d7b8-", 3), seq)
		k := &killable{Leaser: cat}
		e, err := New(k, "compactor-lock", id, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &contender{id: id, e: e, k: k, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(c.done); e.Run(ctx) }()
		all = append(all, c)
		return c
	}
	live := make([]*contender, 0, contenders)
	for range contenders {
		live = append(live, start())
	}

	var graceful, abrupt []time.Duration
	end := time.Now().Add(churn)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		var leader *contender
		for _, c := range live {
			if _, ok := c.e.Leader(); ok {
				leader = c
			}
		}
		if leader == nil {
			continue
		}
		// Drain the elections so far; the next one is the replacement.
		for len(elected) > 0 {
			<-elected
		}
		killedAt := time.Now()
		isAbrupt := rand.IntN(2) == 0
		if isAbrupt {
			leader.k.dead.Store(true)
		} else {
			leader.cancel()
		}
		live = slices.DeleteFunc(live, func(c *contender) bool { return c == leader })
		live = append(live, start())
		for {
			var tm term
			select {
			case tm = <-elected:
			case <-time.After(10 * time.Second):
				t.Fatalf("no new leader 10 s after killing %s", leader.id)
			}
			if tm.id != leader.id {
				if isAbrupt {
					abrupt = append(abrupt, tm.at.Sub(killedAt))
				} else {
					graceful = append(graceful, tm.at.Sub(killedAt))
				}
				break
			}
		}
	}
	for _, c := range all {
		c.cancel()
	}
	for _, c := range all {
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("contender %s still running 20 s after its cancel", c.id)
		}
	}
	if n := leaders.Load(); n != 0 {
		t.Errorf("%d leaders after everyone stopped", n)
	}
	mu.Lock()
	t.Logf("%d terms, %d contenders started; replacement after a stop: %s; after an abrupt kill (no release): %s (lease %v)",
		len(terms), seq, stats(graceful), stats(abrupt), ttl)
	mu.Unlock()
	if len(graceful)+len(abrupt) < 5 {
		t.Errorf("only %d leader kills in %v", len(graceful)+len(abrupt), churn)
	}
	if violations.Load() > 0 {
		t.Fatalf("%d safety violations", violations.Load())
	}
}

func stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return fmt.Sprintf("n=%d mean=%v median=%v max=%v", len(s),
		(sum / time.Duration(len(s))).Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
