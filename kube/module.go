package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
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
	// Components is the component catalog the leader publishes. StartModule
	// copies it: changing the slice (or what it holds) afterwards changes
	// nothing that is published.
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
	leaderID atomic.Pointer[string]
	// leadCtx is the context of the current term while the election says
	// this replica leads (nil otherwise): it ends when the term ends.
	leadMu  sync.Mutex
	leadCtx context.Context
	cancel  context.CancelFunc
	unhook  atomic.Pointer[func() bool] // unregisters Close from the end of StartModule's ctx
	wg      sync.WaitGroup
	once    sync.Once
	publish chan struct{}
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
	cfg.Components = copyComponents(cfg.Components)
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
			Logger:           cfg.Logger,
			OnStartedLeading: m.startedLeading,
			OnStoppedLeading: m.stoppedLeading,
			OnNewLeader:      func(id string) { m.leaderID.Store(&id) },
		})
	}()
	go func() { defer m.wg.Done(); m.publisher(runCtx) }()
	// From here on the end of ctx is a Close: besides the goroutines above
	// it stops the catalog's informers, whose watches would outlive it.
	stop()
	unhook := context.AfterFunc(ctx, func() { m.Close() })
	m.unhook.Store(&unhook)
	return m, nil
}

// copyComponents returns a deep copy of cs: the module publishes what it
// was started with, whatever its caller does with its slice afterwards.
func copyComponents(cs []v1alpha1.TinyModuleComponentStatus) []v1alpha1.TinyModuleComponentStatus {
	if cs == nil {
		return nil
	}
	out := make([]v1alpha1.TinyModuleComponentStatus, len(cs))
	for i := range cs {
		cs[i].DeepCopyInto(&out[i])
	}
	return out
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
	_, err := m.cat.c.createModule(ctx, tm, false)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return apiErr("create TinyModule "+m.name, err)
	}
	return nil
}

// startedLeading begins a term. client-go runs it in a goroutine of its
// own, which may run after the term has already ended (and after
// stoppedLeading): a term whose context is over is ignored.
func (m *Module) startedLeading(ctx context.Context) {
	m.leadMu.Lock()
	if ctx.Err() == nil {
		m.leadCtx = ctx
	}
	m.leadMu.Unlock()
	m.kick()
}

func (m *Module) stoppedLeading() {
	m.leadMu.Lock()
	m.leadCtx = nil
	m.leadMu.Unlock()
}

// term returns the context of the current term, nil when the election
// does not say this replica leads.
func (m *Module) term() context.Context {
	m.leadMu.Lock()
	defer m.leadMu.Unlock()
	if m.leadCtx == nil || m.leadCtx.Err() != nil {
		return nil
	}
	return m.leadCtx
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
	if ev.Instance.ID == m.name && m.term() != nil {
		m.kick()
	}
}

// publisher writes the status while this replica leads: at once when it
// becomes the leader, and again whenever the stored status differs; each
// write first reads the Lease and is skipped unless it names this replica
// (a leader whose Lease was taken does not fight the new leader while
// client-go still tries to renew). A
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
		term := m.term()
		if term == nil {
			retryIn = 0
			continue
		}
		// The write is the term's: it is abandoned when the term ends.
		if err := m.publishStatus(term); err != nil {
			if ctx.Err() != nil {
				return
			}
			if term.Err() != nil {
				continue
			}
			retryIn = min(max(2*retryIn, 200*time.Millisecond), 5*time.Second)
			if errors.Is(err, errNotLeading) {
				// The Lease names another holder while client-go still
				// tries to renew it: wait, in case it comes back to us
				// (client-go then starts no new term).
				m.log.Info("tinymodule: the Lease is held by another replica; not publishing status", "err", err, "retry_in", retryIn)
			} else {
				m.log.Warn("tinymodule: status not published; retrying", "err", err, "retry_in", retryIn)
			}
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
		// Semantically: the stored status has been through JSON, where an
		// empty slice (of components, tags, ports, a schema) is no slice.
		if equality.Semantic.DeepEqual(tm.Status, want) {
			return nil
		}
		if m.term() == nil {
			return errNotLeading
		}
		// A leader whose Lease another replica has taken believes it leads
		// until client-go gives up renewing (the renew deadline): the
		// Lease itself says whether this write is still ours.
		if err := m.holdsLease(ctx); err != nil {
			return err
		}
		tm.Status = want
		if _, err := m.cat.c.updateModuleStatus(ctx, tm); err != nil {
			return err
		}
		m.log.Info("tinymodule: status published", "addr", want.Addr, "version", want.Version)
		return nil
	})
}

// holdsLease reads the module's Lease and fails with errNotLeading unless
// it names this replica.
func (m *Module) holdsLease(ctx context.Context) error {
	l, err := m.cat.c.getLease(ctx, m.name+LeaseSuffix)
	if isNotFound(err) {
		return fmt.Errorf("%w: the Lease %s is gone", errNotLeading, m.name+LeaseSuffix)
	}
	if err != nil {
		return err
	}
	if v, _ := viewLease(l); v.holder != m.cfg.Identity {
		return fmt.Errorf("%w: the Lease %s is held by %q", errNotLeading, m.name+LeaseSuffix, v.holder)
	}
	return nil
}

// IsLeader reports whether this replica leads its module now: the election
// says it leads, and the Lease as last seen by the catalog's watch names it.
// (client-go alone keeps a leader whose Lease was taken from it leading
// until its renew deadline passes; IsLeader is false from the moment the
// watch sees the other holder. It may also be false for the moment between
// winning the Lease and the watch seeing it.)
func (m *Module) IsLeader() bool {
	if m.term() == nil {
		return false
	}
	holder, ok := m.cat.m.leaseHolder(m.name + LeaseSuffix)
	return ok && holder == m.cfg.Identity
}

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
		if u := m.unhook.Load(); u != nil {
			(*u)() // a long-lived ctx does not keep a closed module
		}
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
