package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
	"github.com/switchboard-io/switchboard/pool"
)

// ModuleConfig describes one replica of a module running in a cluster.
type ModuleConfig struct {
	// Name is the module's name; its TinyModule and Lease are named after
	// its sanitised form (ResourceName, LeaseName).
	Name string
	// Version is the module's version, published in status.version.
	Version string
	// SDKVersion is published in status.sdkVersion (default: the version
	// of the switchboard module this program was built with).
	SDKVersion string
	// Addr is the address the leader publishes in status.addr: the
	// module's Service host:port, or nats://tinymodule.<module>.msg.
	Addr string
	// Image is written to spec.image when the TinyModule is created.
	Image string
	// Components is the component catalog the leader publishes.
	Components []v1alpha1.TinyModuleComponentStatus
	// Identity is this replica's election identity (default: Identity(),
	// the pod name). It is used whole.
	Identity string
	// Namespace (default: the kubeconfig's or the pod's).
	Namespace string
	// Config is the client configuration (default: LoadConfig()).
	Config *rest.Config
	// Election timings (default 15 s / 10 s / 2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Pool, if set, is fed with every other module of the namespace:
	// registered at its address while active, deregistered when its
	// TinyModule is deleted or its Lease is no longer held.
	Pool *pool.Pool
	// Logger receives the module side's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Module is a running replica: its TinyModule exists, it contends for the
// Lease, publishes status while it leads, and follows every TinyModule of
// its namespace.
type Module struct {
	cfg      ModuleConfig
	name     string // the TinyModule's name
	cat      *Catalog
	cache    *discovery.Cache
	log      *slog.Logger
	leader   atomic.Bool
	leaderID atomic.Pointer[string]
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	publish  chan struct{}
}

// StartModule creates the module's TinyModule (AlreadyExists is fine: every
// replica does this), starts the election on "<module>-lock", and starts
// following the namespace's TinyModules into cfg.Pool and a discovery
// cache. It returns once that cache holds the current set. Close (or the
// end of ctx) stops everything and, if this replica leads, releases the
// Lease.
func StartModule(ctx context.Context, cfg ModuleConfig) (*Module, error) {
	name, err := ResourceName(cfg.Name)
	if err != nil {
		return nil, err
	}
	if cfg.Identity == "" {
		if cfg.Identity, err = Identity(); err != nil {
			return nil, err
		}
	}
	if cfg.Addr != "" {
		if err := switchboard.ValidateAddress(cfg.Addr); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SDKVersion == "" {
		cfg.SDKVersion = SDKVersion()
	}
	if cfg.Config == nil || cfg.Namespace == "" {
		c, ns, err := LoadConfig()
		if err != nil {
			return nil, err
		}
		if cfg.Config == nil {
			cfg.Config = c
		}
		if cfg.Namespace == "" {
			cfg.Namespace = ns
		}
	}
	cat, err := New(cfg.Config, cfg.Namespace, switchboard.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("module", name, "identity", cfg.Identity)
	m := &Module{cfg: cfg, name: name, cat: cat, log: log, publish: make(chan struct{}, 1)}
	if err := m.createResource(ctx); err != nil {
		cat.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	stop := context.AfterFunc(ctx, cancel)
	m.cache, err = discovery.New(runCtx, cat, discovery.Options{Logger: cfg.Logger, OnEvent: m.onEvent})
	if err != nil {
		stop()
		cancel()
		cat.Close()
		return nil, err
	}
	if cfg.Pool != nil {
		events, err := cat.Watch(runCtx, switchboard.Query{})
		if err != nil {
			stop()
			m.Close()
			return nil, err
		}
		others := make(chan switchboard.Event, 64)
		m.wg.Add(2)
		go func() {
			defer m.wg.Done()
			defer close(others)
			for ev := range events {
				if ev.Instance.ID == name && ev.Kind != switchboard.EventSynced && ev.Kind != switchboard.EventError {
					continue // our own module is dispatched locally
				}
				select {
				case others <- ev:
				case <-runCtx.Done():
					return
				}
			}
		}()
		go func() { defer m.wg.Done(); cfg.Pool.FollowEvents(runCtx, others) }()
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		_ = cat.RunElection(runCtx, ElectionConfig{
			Lease: name + LeaseSuffix, Identity: cfg.Identity,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
			Logger: cfg.Logger,
			OnStartedLeading: func(context.Context) {
				m.leader.Store(true)
				m.kick()
			},
			OnStoppedLeading: func() { m.leader.Store(false) },
			OnNewLeader:      func(id string) { m.leaderID.Store(&id) },
		})
	}()
	go func() { defer m.wg.Done(); m.publisher(runCtx) }()
	return m, nil
}

// SDKVersion is the version of the switchboard module this program was
// built with ("(devel)" inside this repository), as status.sdkVersion.
func SDKVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	const path = "github.com/switchboard-io/switchboard"
	if bi.Main.Path == path {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}

func (m *Module) createResource(ctx context.Context) error {
	tm := &v1alpha1.TinyModule{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.cat.c.ns},
		Spec:       v1alpha1.TinyModuleSpec{Image: m.cfg.Image},
	}
	_, err := m.cat.c.createModule(ctx, tm)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return apiErr("create TinyModule "+m.name, err)
	}
	return nil
}

func (m *Module) kick() {
	select {
	case m.publish <- struct{}{}:
	default:
	}
}

// onEvent re-checks our status when our own TinyModule changed (it was
// re-created empty, or someone else wrote its status).
func (m *Module) onEvent(ev switchboard.Event) {
	if ev.Instance.ID == m.name && m.leader.Load() {
		m.kick()
	}
}

// publisher writes the status while this replica leads: at once when it
// becomes the leader, and again whenever the stored status differs. A
// TinyModule deleted while the module runs is not re-created (the replicas
// create it at startup, as the SDK does).
func (m *Module) publisher(ctx context.Context) {
	retryIn := time.Duration(0)
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.publish:
		case <-timer:
		}
		timer = nil
		if !m.leader.Load() {
			continue
		}
		if err := m.publishStatus(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			retryIn = min(max(2*retryIn, 200*time.Millisecond), 5*time.Second)
			m.log.Warn("tinymodule: status not published; retrying", "err", err, "retry_in", retryIn)
			timer = time.After(retryIn)
			continue
		}
		retryIn = 0
	}
}

func (m *Module) status() v1alpha1.TinyModuleStatus {
	return v1alpha1.TinyModuleStatus{
		Addr: m.cfg.Addr, Name: m.cfg.Name, Version: m.cfg.Version, SDKVersion: m.cfg.SDKVersion,
		Components: m.cfg.Components,
	}
}

var errNotLeading = errors.New("no longer leading")

func (m *Module) publishStatus(ctx context.Context) error {
	want := m.status()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tm, err := m.cat.c.getModule(ctx, m.name)
		if apierrors.IsNotFound(err) {
			// Deleted by hand: every replica creates it at startup (as the
			// SDK does); a leader does not bring it back behind an operator.
			m.log.Warn("tinymodule: not found; not publishing status", "err", err)
			return nil
		}
		if err != nil {
			return err
		}
		if reflect.DeepEqual(tm.Status, want) {
			return nil
		}
		if !m.leader.Load() {
			return errNotLeading
		}
		tm.Status = want
		if _, err := m.cat.c.updateModuleStatus(ctx, tm); err != nil {
			return err
		}
		m.log.Info("tinymodule: status published", "addr", want.Addr, "version", want.Version)
		return nil
	})
}

// IsLeader reports whether this replica leads its module now.
func (m *Module) IsLeader() bool { return m.leader.Load() }

// Leader returns the identity of the leader this replica last observed.
func (m *Module) Leader() string {
	if p := m.leaderID.Load(); p != nil {
		return *p
	}
	return ""
}

// Name returns the module's TinyModule name.
func (m *Module) Name() string { return m.name }

// Identity returns this replica's election identity.
func (m *Module) Identity() string { return m.cfg.Identity }

// Catalog returns the kube catalog of the module's namespace.
func (m *Module) Catalog() *Catalog { return m.cat }

// Cache returns the discovery cache of every active module of the
// namespace.
func (m *Module) Cache() *discovery.Cache { return m.cache }

// Close stops the election (a leader releases its Lease), the watches and
// the catalog. It is idempotent.
func (m *Module) Close() error {
	m.once.Do(func() {
		m.cancel()
		m.wg.Wait()
		if m.cache != nil {
			m.cache.Close()
		}
		m.cat.Close()
	})
	return nil
}

// String names the replica: "namespace/module (identity)".
func (m *Module) String() string {
	return fmt.Sprintf("%s/%s (%s)", m.cat.c.ns, m.name, m.cfg.Identity)
}
