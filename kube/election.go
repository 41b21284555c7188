package kube

import (
	"context"
	"log/slog"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/switchboard-io/switchboard"
)

// Election timings of SPEC §5: lease 15 s, renew deadline 10 s, retry 2 s.
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

// RunElection runs client-go leader election on the Lease until ctx ends:
// when this contender loses the lease (or fails to renew it in time), it
// steps down and contends again after a backoff (the retry period,
// doubling up to the lease duration). On the end of ctx a leader releases
// the Lease at once (ReleaseOnCancel), so another replica takes over
// within a retry period instead of a lease duration. It returns at once
// with ErrClosed on a closed catalog, and with an ErrInvalid error when
// the Lease name or the identity is missing or the Lease name is no
// Kubernetes object name.
func (k *Catalog) RunElection(ctx context.Context, cfg ElectionConfig) error {
	if err := k.check(); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(cfg.Lease); len(errs) > 0 {
		return &switchboard.FieldError{Field: "lease", Value: cfg.Lease, Reason: strings.Join(errs, "; ")}
	}
	if cfg.Identity == "" {
		return &switchboard.FieldError{Field: "identity", Reason: "an election identity is required (the pod name)"}
	}
	cfg.defaults()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.Lease, Namespace: k.c.ns},
		Client:     k.c.coord,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
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
			return nil
		}
		if time.Since(started) > 2*cfg.LeaseDuration {
			backoff = cfg.RetryPeriod // led for a while: this loss is news, not a flap
		}
		cfg.Logger.Warn("leader election: lost the lease; contending again", "lease", cfg.Lease, "identity", cfg.Identity, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, cfg.LeaseDuration)
	}
}
