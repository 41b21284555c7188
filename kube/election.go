package kube

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/switchboard-io/switchboard"
)

// Election timings, as the TinySystems SDK sets them: lease 15 s, renew
// deadline 10 s, retry 2 s.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ElectionConfig configures RunElection.
type ElectionConfig struct {
	// Lease is the Lease's name ("<module>-lock", see LeaseName).
	Lease string
	// Identity is the full, unique identity of this contender (the pod
	// name). It is used whole.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to 15 s, 10 s
	// and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnStartedLeading runs when this contender becomes the leader; its
	// context ends when leadership ends.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading runs when this contender stops leading.
	OnStoppedLeading func()
	// OnNewLeader runs when the observed leader changes.
	OnNewLeader func(identity string)
	// Logger receives the election's logs (nil: slog.Default()).
	Logger *slog.Logger
}

func (c *ElectionConfig) defaults() {
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline <= 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod <= 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// RunElection runs client-go leader election on the Lease until ctx ends
// or the catalog is closed: when this contender loses the lease (or fails
// to renew it in time), it steps down and contends again after a backoff
// (the retry period, doubling up to the lease duration). On the end of ctx
// or Close a leader releases the Lease at once (ReleaseOnCancel), so
// another replica takes over within a retry period instead of a lease
// duration; Close waits for that (so Close must not be called from
// OnStoppedLeading, which runs inside RunElection). It returns nil when
// ctx ended, ErrClosed when the catalog was (or is) closed, and at once
// with an ErrInvalid error when the Lease name or the identity is missing
// or the Lease name is no Kubernetes object name.
//
// A request on the Lease that fails (other than a lost race) is logged
// through cfg.Logger, once until it succeeds again; a refusal (Forbidden:
// the Role lacks get, create or update on leases.coordination.k8s.io;
// Unauthorized) at Error level. The election keeps retrying, so a
// permission granted later takes effect without a restart.
func (k *Catalog) RunElection(ctx context.Context, cfg ElectionConfig) error {
	// The election is the catalog's until it returns: Close ends it (and
	// waits for the release of the Lease).
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return switchboard.ErrClosed
	}
	k.elections.Add(1)
	k.mu.Unlock()
	defer k.elections.Done()
	if errs := validation.IsDNS1123Subdomain(cfg.Lease); len(errs) > 0 {
		return &switchboard.FieldError{Field: "lease", Value: cfg.Lease, Reason: strings.Join(errs, "; ")}
	}
	if cfg.Identity == "" {
		return &switchboard.FieldError{Field: "identity", Reason: "an election identity is required (the pod name)"}
	}
	cfg.defaults()
	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(k.closing, cancel)()
	ended := func() error {
		if outer.Err() == nil && k.closing.Err() != nil {
			return switchboard.ErrClosed
		}
		return nil
	}
	lock := &reportingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: cfg.Lease, Namespace: k.c.ns},
			Client:     k.c.coord,
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		log: cfg.Logger.With("lease", k.c.ns+"/"+cfg.Lease, "identity", cfg.Identity),
	}
	backoff := cfg.RetryPeriod
	for {
		started := time.Now()
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.Lease,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					cfg.Logger.Info("leader election: leading", "lease", cfg.Lease, "identity", cfg.Identity)
					if cfg.OnStartedLeading != nil {
						cfg.OnStartedLeading(ctx)
					}
				},
				OnStoppedLeading: func() {
					cfg.Logger.Info("leader election: stopped leading", "lease", cfg.Lease, "identity", cfg.Identity)
					if cfg.OnStoppedLeading != nil {
						cfg.OnStoppedLeading()
					}
				},
				OnNewLeader: func(id string) {
					if cfg.OnNewLeader != nil {
						cfg.OnNewLeader(id)
					}
				},
			},
		})
		if err != nil {
			return err // a bad configuration: retrying cannot help
		}
		le.Run(ctx)
		if ctx.Err() != nil {
			return ended()
		}
		if time.Since(started) > 2*cfg.LeaseDuration {
			backoff = cfg.RetryPeriod // led for a while: this loss is news, not a flap
		}
		cfg.Logger.Warn("leader election: lost the lease; contending again", "lease", cfg.Lease, "identity", cfg.Identity, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return ended()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, cfg.LeaseDuration)
	}
}

// reportingLock is the election's Lease lock, which reports the failures of
// its requests through the election's logger: client-go's elector logs
// them only through klog, so a module whose Role lacks a verb on Leases
// would never lead and say nothing where its logs go. Each operation (get,
// create, update) reports a failure once, and again only when the failure
// changes or after the operation succeeded in between; lost races (a
// conflicting update, a create that found the Lease created meanwhile), a
// Lease that does not exist yet and cancelled requests are the election's
// normal course, not failures.
type reportingLock struct {
	resourcelock.Interface
	log *slog.Logger

	mu     sync.Mutex
	failed map[string]string // by operation: the failure last reported
}

func (l *reportingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if apierrors.IsNotFound(err) {
		l.report(ctx, "get", nil)
	} else {
		l.report(ctx, "get", err)
	}
	return r, raw, err
}

func (l *reportingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.report(ctx, "create", err)
	return err
}

func (l *reportingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.report(ctx, "update", err)
	return err
}

// report records the outcome of one request on the Lease.
func (l *reportingLock) report(ctx context.Context, op string, err error) {
	if err != nil && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || ctx.Err() != nil) {
		return
	}
	l.mu.Lock()
	was, hadFailed := l.failed[op]
	switch {
	case err == nil && hadFailed:
		delete(l.failed, op)
	case err != nil && (!hadFailed || was != err.Error()):
		if l.failed == nil {
			l.failed = map[string]string{}
		}
		l.failed[op] = err.Error()
	default:
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	switch {
	case err == nil:
		l.log.Info("leader election: "+op+" of the Lease works again", "op", op)
	case apierrors.IsForbidden(err):
		l.log.Error("leader election: the API server refuses to "+op+" the Lease: this replica cannot lead until its Role allows get, create and update on leases.coordination.k8s.io (see deploy/rbac.yaml); retrying",
			"op", op, "err", err)
	case apierrors.IsUnauthorized(err):
		l.log.Error("leader election: the API server does not accept this replica's credentials: it cannot lead; retrying",
			"op", op, "err", err)
	default:
		l.log.Warn("leader election: "+op+" of the Lease failed; retrying", "op", op, "err", err)
	}
}
