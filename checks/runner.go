// Package checks runs the active health checks of a catalog: it probes the
// target of every instance registered with a switchboard.Check (http,
// https, tcp, grpc) at the check's interval and records the result with
// the catalog's switchboard.HealthSetter when the status changes, so that
// services which cannot heartbeat (a database, a third-party server) are
// discovered too.
//
// Several runners may share one catalog (one per `switchboard serve`):
// the checks are split into shards (Options.Shards, 64), an instance's
// shard is a hash of its id, and a runner probes a shard's checks only
// while it holds the shard's lease (switchboard.Leaser). Each runner holds
// a membership lease too, so every runner knows how many are alive and
// takes at most its fair share of the shards; a runner that stops or is
// killed hands its shards over within one lease TTL. A runner stops
// probing a shard a margin before its lease could expire (counted by its
// own monotonic clock from the request that last renewed it), so a check
// never runs on two runners at once.
//
// A check's status turns critical after Check.Failures failed probes in a
// row, and back (passing, or warning for HTTP 429) after Check.Successes
// good ones; a row critical for Check.DeregisterAfter is deleted. A row
// whose metadata holds MetadataCheckOnly = "true" has no heartbeats of its
// own: the runner probing it renews it (at a third of its TTL), so it
// stays until it is deregistered or its check deletes it.
//
// Policy says which hosts a check may target: what stores registrations
// (the server's register path, the CLI) asks Policy.Check first, and the
// runner asks it again before it probes.
package checks

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-io/switchboard"
)

// MetadataCheckOnly is the metadata key of a registration whose liveness is
// its check's alone: with the value "true", the runner that probes the
// row heartbeats it, a third of its TTL apart, for as long as it runs its
// check (passing or not); otherwise the registrant heartbeats it, and the
// row is alive only while both its heartbeats and its check hold. A row
// whose check the runner's policy refuses is not renewed.
const MetadataCheckOnly = "switchboard.check-only"

// Defaults of Options.
const (
	DefaultShards   = 64
	DefaultLeaseTTL = 15 * time.Second
)

// Lease names: every runner on a catalog uses the same.
const (
	shardLeasePrefix  = "switchboard.checks.shard."
	memberLeasePrefix = "switchboard.checks.runner."
)

// Options tunes a Runner. Zero values take the defaults.
type Options struct {
	// Identity names this runner in the catalog's leases; unique per
	// process (default: host name, process id and a random suffix).
	Identity string
	// Shards is how many shards the checks are split into (default 64).
	// Every runner on one catalog must use the same number.
	Shards int
	// LeaseTTL is the duration of the shard and membership leases
	// (default 15s): a runner killed hands its checks over within it.
	// Leases are renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// Policy says which targets may be probed; a check it refuses is not
	// probed and its instance turns critical, saying why.
	Policy Policy
	// Metrics, when set, receives the probes and status changes.
	Metrics *Metrics
	// Logger receives the runner's logs (default slog.Default()).
	Logger *slog.Logger
	// Prober probes the targets (default NewProber with no options).
	Prober *Prober

	// probed, in tests, is told of every probe.
	probed func(identity, id string, start, end time.Time)
}

// Runner runs the checks of one catalog. Make one with New.
type Runner struct {
	cat    switchboard.Catalog
	hs     switchboard.HealthSetter
	leaser switchboard.Leaser // nil: this runner runs every check
	opts   Options
	log    *slog.Logger
	margin time.Duration
	epoch  time.Time // the origin of the probes' tick grid

	offset atomic.Int64 // catalog clock minus local clock (ns)

	mu        sync.Mutex
	instances map[string]switchboard.Instance // those with a check
	loops     map[string]*loop
	queue     queue         // the loops probed, by their next tick
	beats     queue         // the loops whose rows the runner renews, by their next renewal
	wake      chan struct{} // tells schedule of a loop due before all others
	work      chan *loop    // to the workers waiting for a probe to run
	owned     map[int]*shard
	running   atomic.Bool
}

// loop is the probing of one instance's check. Its check and address are
// the instance's when the loop started (a change of either starts a new
// loop); whether the runner renews the row, and how often, follow the
// instance's latest metadata and TTL (beat, every).
type loop struct {
	in      switchboard.Instance // when the loop started
	ctx     context.Context      // ends when the loop stops
	cancel  context.CancelFunc
	done    chan struct{} // closed once stopped with no probe running
	shard   int
	refused bool          // by the policy: not probed, not renewed (set once, at start)
	every   time.Duration // a third of the row's TTL: how often the runner renews a check-only one

	// Scheduling (r.mu held).
	next    time.Time // the slot due, on the check's own phase
	index   int       // in r.queue, beside next's tick; -1: not scheduled
	beat    int       // in r.beats: the row is check-only and not refused; -1: not renewed
	busy    bool      // a probe (or a refusal's write) is running
	stopped bool

	// The probes' state, read and written by one probe at a time.
	status switchboard.Status
	since  time.Time
	run    streak
}

// shard is a shard whose lease this runner holds.
type shard struct {
	lease  switchboard.Lease
	until  time.Time // local monotonic: when to stop unless a renewal is confirmed
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
}

// New returns a runner of cat's checks. cat must implement
// switchboard.HealthSetter; without switchboard.Leaser the runner runs
// every check itself, so only one runner may run on such a catalog.
func New(cat switchboard.Catalog, opts Options) (*Runner, error) {
	hs, ok := cat.(switchboard.HealthSetter)
	if !ok {
		return nil, fmt.Errorf("checks: %w: the catalog (%T) does not store check results", switchboard.ErrInvalid, cat)
	}
	if opts.Shards < 0 || opts.LeaseTTL < 0 {
		return nil, fmt.Errorf("checks: %w: Shards and LeaseTTL must not be negative", switchboard.ErrInvalid)
	}
	if opts.Shards == 0 {
		opts.Shards = DefaultShards
	}
	if opts.Shards > 1000 {
		return nil, fmt.Errorf("checks: %w: at most 1000 shards", switchboard.ErrInvalid)
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.LeaseTTL < 30*time.Millisecond {
		return nil, fmt.Errorf("checks: %w: LeaseTTL (%s) must be at least 30ms", switchboard.ErrInvalid, opts.LeaseTTL)
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s-%d-%06x", host, os.Getpid(), rand.N(1<<24))
	}
	if err := switchboard.ValidateLease(memberLease(opts.Identity), opts.Identity); err != nil {
		return nil, fmt.Errorf("checks: identity: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Prober == nil {
		opts.Prober = NewProber(ProberOptions{})
	}
	r := &Runner{cat: cat, hs: hs, opts: opts, margin: opts.LeaseTTL / 5, epoch: time.Now(),
		log:       opts.Logger.With("checks", opts.Identity),
		instances: map[string]switchboard.Instance{}, loops: map[string]*loop{}, owned: map[int]*shard{},
		wake: make(chan struct{}, 1), work: make(chan *loop),
		queue: queue{pos: func(l *loop) *int { return &l.index }},
		beats: queue{pos: func(l *loop) *int { return &l.beat }}}
	r.leaser, _ = cat.(switchboard.Leaser)
	return r, nil
}

// Run runs cat's checks with New's options until ctx ends; see
// Runner.Run.
func Run(ctx context.Context, cat switchboard.Catalog, opts Options) error {
	r, err := New(cat, opts)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// Identity is the runner's name in the catalog's leases.
func (r *Runner) Identity() string { return r.opts.Identity }

// Shards returns the shards this runner holds now, in order.
func (r *Runner) Shards() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for i := 0; i < r.opts.Shards; i++ {
		if r.owned[i] != nil {
			out = append(out, i)
		}
	}
	return out
}

// Running returns how many checks this runner probes now.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.loops)
}

// Run watches the catalog's instances (every row, stale and critical ones
// included) and probes the checks of the shards it holds until ctx ends;
// then it stops probing, gives its leases back and returns nil. It
// returns an error when the catalog cannot be watched, or was closed.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("checks: Run called while another Run of this Runner is running")
	}
	defer r.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if now, err := r.cat.Now(ctx); err == nil {
		r.offset.Store(int64(now.Sub(time.Now())))
	}
	events, err := r.cat.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		return fmt.Errorf("checks: watch: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); r.manageShards(ctx) }()
	go func() { defer wg.Done(); r.heartbeat(ctx) }()
	go func() { defer wg.Done(); r.schedule(ctx) }()
	var werr error
	for ev := range events {
		switch ev.Kind {
		case switchboard.EventAdded, switchboard.EventUpdated:
			if ev.Instance.Check != nil {
				r.put(ctx, ev.Instance)
			} else {
				r.remove(ev.Instance.ID)
			}
		case switchboard.EventRemoved:
			r.remove(ev.Instance.ID)
		case switchboard.EventError:
			r.log.Warn("checks: the catalog's watch reports an error; checks go on with what it knew", "err", ev.Err)
		}
	}
	if ctx.Err() == nil {
		werr = errors.New("checks: the catalog's watch ended (catalog closed?)")
		cancel()
	}
	wg.Wait()
	r.stopAll()
	return werr
}

// ShardOf is the shard of an instance id among n.
func ShardOf(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

func shardLease(i int) string { return fmt.Sprintf("%s%03d", shardLeasePrefix, i) }

// memberLease is the membership lease of a runner: its identity, or a hash
// of it when too long for a lease name.
func memberLease(identity string) string {
	if len(identity) <= 200 {
		return memberLeasePrefix + identity
	}
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s%s-%016x", memberLeasePrefix, identity[:150], h.Sum64())
}

// catalogNow is the catalog's clock as last measured against the local one.
func (r *Runner) catalogNow() time.Time {
	return time.Now().Add(time.Duration(r.offset.Load()))
}

// holds reports whether the runner may probe the checks of shard i now
// (r.mu held).
func (r *Runner) holds(i int) bool {
	if r.leaser == nil {
		return true
	}
	s := r.owned[i]
	return s != nil && time.Now().Before(s.until) && s.ctx.Err() == nil
}

// shardContext is the context the checks of shard i run under (r.mu held).
func (r *Runner) shardContext(ctx context.Context, i int) context.Context {
	if r.leaser == nil {
		return ctx
	}
	return r.owned[i].ctx
}

// put learns (or relearns) an instance with a check.
func (r *Runner) put(ctx context.Context, in switchboard.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.instances[in.ID]
	r.instances[in.ID] = in
	if l := r.loops[in.ID]; l != nil {
		// The loop probes old's check at old's address; a new TTL or new
		// metadata changes only whether and how often the heartbeat
		// renews the row.
		if old.Check != nil && *old.Check == *in.Check && old.Address == in.Address {
			r.setRow(l, in)
			return
		}
		r.stopLoop(in.ID)
	}
	r.startLoop(ctx, in)
}

// remove forgets an instance (deleted, or no check any more).
func (r *Runner) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.instances, id)
	r.stopLoop(id)
}

// startLoop starts probing in's check if its shard is held (r.mu held).
func (r *Runner) startLoop(ctx context.Context, in switchboard.Instance) {
	i := ShardOf(in.ID, r.opts.Shards)
	if !r.holds(i) {
		return
	}
	lctx, cancel := context.WithCancel(r.shardContext(ctx, i))
	// The policy is asked here, under r.mu, so that the heartbeat never
	// renews a row whose check it refuses.
	refusal := r.opts.Policy.Check(in)
	l := &loop{in: in, ctx: lctx, cancel: cancel, done: make(chan struct{}), shard: i,
		refused: refusal != nil, index: -1, beat: -1, status: in.Health.Status, since: in.Health.Since}
	r.setRow(l, in)
	r.loops[in.ID] = l
	r.opts.Metrics.addRunning(1)
	if refusal != nil {
		l.busy = true
		go func() {
			defer r.idle(l)
			r.refused(lctx, in, refusal)
		}()
		return
	}
	r.enqueue(l)
}

// stopLoop stops probing id's check and returns what is closed when its
// last probe has ended (r.mu held).
func (r *Runner) stopLoop(id string) <-chan struct{} {
	l := r.loops[id]
	if l == nil {
		return nil
	}
	l.cancel()
	delete(r.loops, id)
	r.dequeue(l)
	l.stopped = true
	if !l.busy {
		close(l.done)
	}
	r.opts.Metrics.addRunning(-1)
	return l.done
}

// stopAll stops every check and waits for their probes to end.
func (r *Runner) stopAll() {
	r.mu.Lock()
	var done []<-chan struct{}
	for id := range r.loops {
		done = append(done, r.stopLoop(id))
	}
	r.mu.Unlock()
	for _, d := range done {
		<-d
	}
}
