// Package kube is the Kubernetes backend of Switchboard: modules are
// TinyModule custom resources
// (operator.tinysystems.io/v1alpha1), their liveness is the coordination
// Lease "<module>-lock" that their replicas elect a leader on.
//
// Catalog (DSN kube://NAMESPACE) lists and watches the TinyModules of a
// namespace through the same switchboard.Catalog interface as every other
// backend, so ls, watch, the resolver, the pool and the discovery cache work
// in a cluster unchanged. A module is active only while it has an address
// and its Lease is held (renew time + duration in the future); a module
// whose pods all died is reported stale and routed to no more. Its traffic
// state is in its TinyModule's spec: weight, zone and draining (Catalog is
// a switchboard.Drainer). kube:// stores no active checks, which the
// kubelet's probes make redundant: it is no switchboard.HealthSetter, and
// refuses a registration with a check.
//
// StartModule is the module side: it creates the module's TinyModule, runs
// client-go leader election on its Lease (the leader publishes the status),
// and feeds the address pool and a discovery cache from the watch.
//
// Importing this package links client-go; the root package and the SQL
// backends never import it.
package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/kube/types/v1alpha1"
)

func init() {
	switchboard.RegisterBackend("kube", open)
}

// RegisterHolder is the Lease holder identity Catalog.Register and
// Heartbeat write: a module registered through the catalog (not by its own
// replicas) is held by the catalog.
const RegisterHolder = "switchboard-register"

// Catalog is the kube:// backend: the TinyModules and Leases of one
// namespace. It is safe for concurrent use.
type Catalog struct {
	c    *client
	opts switchboard.Options
	m    *mirror
	hub  *hub.Hub

	mu     sync.Mutex
	closed bool
	// closing ends with Close: it ends the elections running on the
	// catalog (RunElection), which elections counts.
	closing   context.Context
	endAll    context.CancelFunc
	elections sync.WaitGroup
	// now is the catalog's one clock (time.Now; tests fix it): every
	// judgement of a Lease (List, Get, Reap, and through the mirror Watch)
	// and every time the catalog stamps (the Leases it takes and renews,
	// Now) reads it. It is not synchronised: a test sets it before the
	// first Watch starts the mirror's goroutines, which read it.
	now func() time.Time
}

var (
	_ switchboard.Catalog      = (*Catalog)(nil)
	_ switchboard.WatchStatser = (*Catalog)(nil)
)

func open(ctx context.Context, dsn switchboard.DSN, opts switchboard.Options) (switchboard.Catalog, error) {
	cfg, ns, err := LoadConfig()
	if err != nil {
		return nil, err
	}
	if dsn.Path != "" {
		ns = dsn.Path
	}
	return New(cfg, ns, opts)
}

// New returns the catalog of namespace ns. A nil cfg is LoadConfig's
// configuration (as in ModuleConfig). Nothing is read until the first call.
func New(cfg *rest.Config, ns string, opts switchboard.Options) (*Catalog, error) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, &switchboard.FieldError{Field: "namespace", Value: ns, Reason: strings.Join(errs, "; ")}
	}
	if cfg == nil {
		c, _, err := LoadConfig()
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	opts = opts.WithDefaults()
	// A Lease's duration is whole seconds: the default is stored rounded
	// up, so it is kept so (what DefaultTTL tells, and what a module
	// without a Lease is judged by).
	opts.DefaultTTL = time.Duration(leaseSecs(opts.DefaultTTL)) * time.Second
	c, err := newClient(cfg, ns)
	if err != nil {
		return nil, err
	}
	cat := &Catalog{c: c, opts: opts, now: time.Now}
	// The mirror reads the catalog's clock, not a copy: a test that fixes
	// cat.now fixes Watch's too.
	cat.m = newMirror(c, func() time.Time { return cat.now() })
	cat.closing, cat.endAll = context.WithCancel(context.Background())
	cat.hub = hub.New(cat.m, hub.Options{PollInterval: opts.PollInterval, Logger: opts.Logger})
	cat.m.hub = cat.hub
	return cat, nil
}

// Namespace returns the catalog's namespace.
func (k *Catalog) Namespace() string { return k.c.ns }

func (k *Catalog) check() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return switchboard.ErrClosed
	}
	return nil
}

// apiErr turns an API failure into a message that says what to do.
func apiErr(what string, err error) error {
	if isNotFound(err) && strings.Contains(err.Error(), noResource) {
		return fmt.Errorf("kube: %s: %w", what, errNoCRD)
	}
	return fmt.Errorf("kube: %s: %w", what, err)
}

// Register writes in as a TinyModule named by its id (the sanitised name
// when the id is empty): address and version in the status (the metadata
// keys image, module_name and sdk_version in spec.image, status.name and
// status.sdkVersion), weight and zone in spec.weight and spec.zone, type,
// capabilities and the other metadata in annotations, and takes the
// module's Lease for RegisterHolder with the instance's TTL rounded up to
// whole seconds (Leases count seconds). It is meant for processes that are
// not replicas of a module running its own election: it takes the Lease
// unconditionally. A Register that loses a race with another writer of the
// same id (AlreadyExists, Conflict) reads the winner's objects and updates
// them. It keeps spec.draining as it is (only Drain writes it), and
// refuses an instance with a check (ErrInvalid on the field "check"):
// kube:// runs no checks.
func (k *Catalog) Register(ctx context.Context, in switchboard.Instance) (switchboard.Instance, error) {
	if err := k.check(); err != nil {
		return switchboard.Instance{}, err
	}
	n, err := switchboard.Normalize(in)
	if err != nil {
		return switchboard.Instance{}, err
	}
	if err := backend.ValidateTTL(n.TTL, k.opts.MaxTTL); err != nil {
		return switchboard.Instance{}, err
	}
	if n.Check != nil {
		return switchboard.Instance{}, refuseCheck(n.Check)
	}
	if n.ID == "" {
		n.ID = n.Name
	}
	if err := validID(n.ID); err != nil {
		return switchboard.Instance{}, err
	}
	ttl := n.TTL
	if ttl == 0 {
		ttl = k.opts.DefaultTTL
	}
	secs := leaseSecs(ttl)
	// The Lease first: watchers then see the module once, live, when its
	// address is published, not first stale and then alive.
	l, err := k.takeLease(ctx, n.ID, secs)
	if err != nil {
		return switchboard.Instance{}, apiErr("register "+n.ID+": lease", err)
	}
	var tm *v1alpha1.TinyModule
	err = retryOnRace(func() error {
		cur, err := k.c.getModule(ctx, n.ID)
		switch {
		case isNotFound(err):
			cur = &v1alpha1.TinyModule{ObjectMeta: metav1.ObjectMeta{Name: n.ID, Namespace: k.c.ns}}
			fromInstance(cur, n)
			status := cur.Status
			if cur, err = k.c.createModule(ctx, cur, true); err != nil {
				return err
			}
			cur.Status = status
		case err != nil:
			return err
		default:
			fromInstance(cur, n)
			status := cur.Status
			if cur, err = k.c.updateModule(ctx, cur); err != nil {
				return err
			}
			cur.Status = status
		}
		tm, err = k.c.updateModuleStatus(ctx, cur)
		return err
	})
	if err != nil {
		k.dropLease(ctx, n.ID, l)
		return switchboard.Instance{}, apiErr("register "+n.ID, crdErr(err))
	}
	return toInstance(tm, l, k.now()), nil
}

// SetStatus writes the status of the TinyModule named name (as a module's
// leader does), retrying on write conflicts.
func (k *Catalog) SetStatus(ctx context.Context, name string, st v1alpha1.TinyModuleStatus) error {
	if err := k.check(); err != nil {
		return err
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tm, err := k.c.getModule(ctx, name)
		if err != nil {
			return err
		}
		tm.Status = st
		_, err = k.c.updateModuleStatus(ctx, tm)
		return err
	})
	if objectMissing(err) {
		return fmt.Errorf("kube: status of %q: %w", name, switchboard.ErrNotFound)
	}
	if err != nil {
		return apiErr("status of "+name, err)
	}
	return nil
}

// raceBackoff paces retryOnRace: every attempt of a round of contenders
// lets at least one of them through, so ten (jittered, growing from 10 ms
// to about 0.4 s) see a handful of concurrent writers through.
var raceBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

// retryOnRace runs fn again (as retry.RetryOnConflict does) when it lost a
// race with another writer: a conflicting update, or a create that found
// the object created meanwhile (fn reads it again and updates it).
func retryOnRace(fn func() error) error {
	return retry.OnError(raceBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, fn)
}

// validID checks that id can name a TinyModule and its Lease.
func validID(id string) error {
	if err := switchboard.ValidateID(id); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(id + LeaseSuffix); len(errs) > 0 {
		return &switchboard.FieldError{Field: "id", Value: id, Reason: "a kube:// id names a TinyModule: lowercase letters, digits, '-' and '.' (" + strings.Join(errs, "; ") + ")"}
	}
	return nil
}

// dropLease deletes l, the Lease a failed Register took, when id has no
// TinyModule (its creation was refused): a Lease of no module would stay,
// since List and Reap look at TinyModules. Only the version Register wrote
// is deleted (a Lease renewed or taken since is kept); a failure leaves it.
func (k *Catalog) dropLease(ctx context.Context, id string, l *coordinationv1.Lease) {
	if _, err := k.c.getModule(ctx, id); !isNotFound(err) {
		return
	}
	_ = k.c.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
}

// takeLease creates or renews the module's Lease for RegisterHolder; secs
// zero keeps the stored duration.
func (k *Catalog) takeLease(ctx context.Context, id string, secs int32) (*coordinationv1.Lease, error) {
	var out *coordinationv1.Lease
	err := retryOnRace(func() error {
		now := metav1.NewMicroTime(k.now())
		l, err := k.c.getLease(ctx, id+LeaseSuffix)
		if isNotFound(err) {
			if secs == 0 {
				secs = leaseSecs(k.opts.DefaultTTL)
			}
			out, err = k.c.leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: id + LeaseSuffix, Namespace: k.c.ns},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(RegisterHolder), LeaseDurationSeconds: ptr.To(secs),
					AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != RegisterHolder {
			l.Spec.HolderIdentity = ptr.To(RegisterHolder)
			l.Spec.AcquireTime = &now
		}
		if secs > 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(secs)
		}
		l.Spec.RenewTime = &now
		out, err = k.c.leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// heartbeatListAbove is the number of ids above which Heartbeat lists the
// namespace's TinyModules once instead of reading each.
const heartbeatListAbove = 16

// Heartbeat renews the Lease of every id that has a TinyModule and returns
// the ids that have none (an id that is valid but no Kubernetes object
// name, which no TinyModule can have, among them). An invalid id, or more
// than switchboard.MaxHeartbeatIDs, is ErrInvalid and renews nothing.
func (k *Catalog) Heartbeat(ctx context.Context, ids ...string) ([]string, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	if err := backend.ValidateHeartbeatIDs(ids); err != nil {
		return nil, err
	}
	// Which ids have a TinyModule: one GET each for a few, one LIST of
	// the namespace for many (a process renewing all its registrations).
	var exists map[string]bool
	if len(ids) > heartbeatListAbove {
		list, err := k.c.listModules(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, apiErr("heartbeat", err)
		}
		exists = make(map[string]bool, len(list.Items))
		for i := range list.Items {
			exists[list.Items[i].Name] = true
		}
	}
	var missing []string
	for _, id := range ids {
		found, err := k.hasModule(ctx, id, exists)
		if err != nil {
			return nil, apiErr("heartbeat "+id, err)
		}
		if !found {
			missing = append(missing, id)
			continue
		}
		if _, err := k.takeLease(ctx, id, 0); err != nil {
			return nil, apiErr("heartbeat "+id, err)
		}
	}
	return missing, nil
}

// hasModule reports whether id has a TinyModule: from listed when it is
// not nil, else by reading it.
func (k *Catalog) hasModule(ctx context.Context, id string, listed map[string]bool) (bool, error) {
	if validID(id) != nil {
		return false, nil
	}
	if listed != nil {
		return listed[id], nil
	}
	_, err := k.c.getModule(ctx, id)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Deregister deletes the TinyModule and its Lease; ErrNotFound when there
// is no such TinyModule.
func (k *Catalog) Deregister(ctx context.Context, id string) error {
	if err := k.check(); err != nil {
		return err
	}
	if validID(id) != nil {
		return fmt.Errorf("kube: deregister %q: %w", id, switchboard.ErrNotFound)
	}
	if err := k.c.deleteModule(ctx, id, metav1.DeleteOptions{}); isNotFound(err) {
		return fmt.Errorf("kube: deregister %q: %w", id, switchboard.ErrNotFound)
	} else if err != nil {
		return apiErr("deregister "+id, err)
	}
	if err := k.c.leases.Delete(ctx, id+LeaseSuffix, metav1.DeleteOptions{}); err != nil && !isNotFound(err) {
		return apiErr("deregister "+id+": lease", err)
	}
	return nil
}

// Get returns one module, stale or not.
func (k *Catalog) Get(ctx context.Context, id string) (switchboard.Instance, error) {
	if err := k.check(); err != nil {
		return switchboard.Instance{}, err
	}
	if validID(id) != nil {
		return switchboard.Instance{}, fmt.Errorf("kube: %q: %w", id, switchboard.ErrNotFound)
	}
	tm, err := k.c.getModule(ctx, id)
	if objectMissing(err) {
		return switchboard.Instance{}, fmt.Errorf("kube: %q: %w", id, switchboard.ErrNotFound)
	} else if err != nil {
		return switchboard.Instance{}, apiErr("get "+id, err)
	}
	if !listed(tm) {
		return switchboard.Instance{}, fmt.Errorf("kube: %q has published no address yet: %w", id, switchboard.ErrNotFound)
	}
	return k.withLease(ctx, "get", tm)
}

// withLease returns the instance of tm with the state of its Lease (none
// when it has none); op names the call in an error.
func (k *Catalog) withLease(ctx context.Context, op string, tm *v1alpha1.TinyModule) (switchboard.Instance, error) {
	l, err := k.c.getLease(ctx, tm.Name+LeaseSuffix)
	if isNotFound(err) {
		l, err = nil, nil
	}
	if err != nil {
		return switchboard.Instance{}, apiErr(op+" "+tm.Name+": lease", err)
	}
	return toInstance(tm, l, k.now()), nil
}

// List returns the modules selected by q, read straight from the API
// server (one list of TinyModules, one of Leases), ordered by name then id.
func (k *Catalog) List(ctx context.Context, q switchboard.Query) ([]switchboard.Instance, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	all, err := k.listAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]switchboard.Instance, 0, len(all))
	for _, in := range all {
		if q.Selects(&in, in.Stale) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b switchboard.Instance) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (k *Catalog) listAll(ctx context.Context) ([]switchboard.Instance, error) {
	mods, err := k.c.listModules(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiErr("list TinyModules in "+k.c.ns, err)
	}
	leases, err := k.c.leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, apiErr("list Leases in "+k.c.ns, err)
	}
	byName := make(map[string]*coordinationv1.Lease, len(leases.Items))
	for i := range leases.Items {
		byName[leases.Items[i].Name] = &leases.Items[i]
	}
	now := k.now()
	out := make([]switchboard.Instance, 0, len(mods.Items))
	for i := range mods.Items {
		if tm := &mods.Items[i]; listed(tm) {
			out = append(out, toInstance(tm, byName[tm.Name+LeaseSuffix], now))
		}
	}
	return out, nil
}

// Watch streams the modules selected by q (see switchboard.Catalog): one
// pair of informers per catalog handle feeds every watcher of the process.
func (k *Catalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	return k.hub.Watch(ctx, q)
}

// Reap deletes the TinyModules (and Leases) whose Lease was last renewed
// longer ago than olderThan, or, when olderThan is zero, than twice its
// duration (of a released Lease, at least ReleaseGrace, as for liveness); a
// TinyModule without a Lease counts from its creation.
func (k *Catalog) Reap(ctx context.Context, olderThan time.Duration) (int, error) {
	if err := k.check(); err != nil {
		return 0, err
	}
	mods, err := k.c.listModules(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, apiErr("reap: list TinyModules", err)
	}
	n := 0
	now := k.now()
	for i := range mods.Items {
		tm := &mods.Items[i]
		l, err := k.c.getLease(ctx, tm.Name+LeaseSuffix)
		if err != nil && !isNotFound(err) {
			return n, apiErr("reap: lease of "+tm.Name, err)
		}
		last, ttl := tm.CreationTimestamp.Time, k.opts.DefaultTTL
		if err == nil {
			v, _ := viewLease(l)
			if !v.renew.IsZero() {
				last = v.renew
			}
			// As long as liveness holds it (toInstance): reaping a released
			// Lease at twice client-go's 1 s would delete the TinyModule of
			// a running module.
			ttl = v.heldFor(ttl)
		}
		cutoff := olderThan
		if cutoff <= 0 {
			cutoff = 2 * ttl
		}
		if now.Sub(last) <= cutoff {
			continue
		}
		// Delete only the version we judged: a module renewed meanwhile
		// keeps its CR.
		err = k.c.deleteModule(ctx, tm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &tm.UID}})
		if isNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return n, apiErr("reap "+tm.Name, err)
		}
		n++
		if err := k.c.leases.Delete(ctx, tm.Name+LeaseSuffix, metav1.DeleteOptions{}); err != nil && !isNotFound(err) {
			return n, apiErr("reap "+tm.Name+": lease", err)
		}
	}
	return n, nil
}

// Now returns this process's clock (the catalog's, which List, Get, Watch
// and Reap judge Leases by): Lease renew times are written by the holders'
// clocks, and liveness compares them with it.
func (k *Catalog) Now(ctx context.Context) (time.Time, error) {
	if err := k.check(); err != nil {
		return time.Time{}, err
	}
	return k.now(), nil
}

// WatchStats reports the watch machinery's state.
func (k *Catalog) WatchStats() switchboard.WatchStats { return k.hub.Stats() }

// Close ends every election running on the catalog (RunElection returns
// ErrClosed; a leader releases its Lease first, and Close waits for that),
// stops the informers and closes every watch. It is idempotent. It must not
// be called from an election's OnStoppedLeading, which runs inside
// RunElection.
func (k *Catalog) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	k.endAll()
	k.elections.Wait()
	k.hub.Close()
	k.m.stop()
	return nil
}

// leaseSecs is a TTL as a Lease's duration: whole seconds, rounded up.
func leaseSecs(ttl time.Duration) int32 {
	return int32((ttl + time.Second - 1) / time.Second)
}

// DefaultTTL is the TTL a module registered without one is given
// (switchboard.TTLDefaulter): Options.DefaultTTL rounded up to whole
// seconds, as its Lease keeps it.
func (k *Catalog) DefaultTTL() time.Duration { return k.opts.DefaultTTL }

var _ switchboard.TTLDefaulter = (*Catalog)(nil)
