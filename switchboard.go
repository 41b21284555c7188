// Package switchboard is the domain of the Switchboard service-discovery and
// module-routing fabric: instances, queries, events, the Catalog every backend
// implements (sqlite/, postgres/, …), leases, validation and node names.
//
// The package imports nothing heavy; backends register themselves with
// RegisterBackend and are chosen by DSN through Open.
//
// # The entry point
//
// A program uses the library in three calls:
//
//	import (
//		"github.com/switchboard-io/switchboard"
//		"github.com/switchboard-io/switchboard/discovery"
//		_ "github.com/switchboard-io/switchboard/sqlite" // the backend of sqlite:// DSNs
//	)
//
//	cat, err := switchboard.Open(ctx, "sqlite://.data/switchboard.db", switchboard.Options{})
//	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{…}, switchboard.BootstrapOptions{})
//	cache, err := discovery.New(ctx, cat, discovery.Options{})
//
// Open chooses the backend by the DSN's scheme, and the backend must be
// linked into the program by a blank import: sqlite for sqlite://,
// postgres for postgres://, remote for http:// and https:// (a
// `switchboard serve`), kube for kube://. Without it Open fails with
// ErrUnknownBackend. Bootstrap registers an instance and keeps it alive
// until its Registration is closed; discovery.New keeps every active
// instance in memory for lookups, current through the catalog's Watch.
// The guides are in the repository's docs/ directory; docs/design.md
// explains how the pieces fit.
package switchboard

import (
	"context"
	"encoding/json"
	"time"
)

// Well-known capabilities: six that the parts of a tracing pipeline share.
// Any other valid token is stored, returned and discoverable just the same.
const (
	CapTraceIngestion     = "trace_ingestion"
	CapStorage            = "storage"
	CapRouting            = "routing"
	CapQueryExecution     = "query_execution"
	CapStorageMaintenance = "storage_maintenance"
	CapKafkaIngestion     = "kafka_ingestion"
)

// Well-known instance types (roles).
const (
	TypeAcceptor  = "acceptor"
	TypeWriter    = "writer"
	TypeRouter    = "router"
	TypeQuerier   = "querier"
	TypeCompactor = "compactor"
)

// Instance is one registered process.
type Instance struct {
	ID           string
	Name         string
	Type         string
	Address      string
	Capabilities []string
	Version      string
	Metadata     map[string]string
	// Components is an optional JSON document (the module's component
	// catalog with per-port schemas).
	Components json.RawMessage
	// TTL is the liveness window; zero means the catalog's default. It is
	// stored rounded up to whole milliseconds on every backend
	// (kube:// rounds up to whole seconds), and Register returns the stored
	// TTL. Under 1ms (but not zero) is ErrInvalid.
	TTL time.Duration
	// RegisteredAt and LastSeen are stamped with the catalog's clock.
	RegisteredAt time.Time
	LastSeen     time.Time
	// Stale is computed when the instance is read: now - LastSeen > TTL.
	Stale bool
	// Revision is the catalog's version of this state: the position in the
	// catalog's change log of the change that last wrote the row (a
	// registration, an update, a revival). It grows with every change of
	// the instance and is comparable across instances of one catalog, as
	// etcd's mod_revision and a Kubernetes resourceVersion are; a heartbeat
	// that only renews LastSeen keeps it. On kube:// it is the TinyModule's
	// resourceVersion, which a change of the module's Lease alone (another
	// leader, a revival) keeps too. Zero means unknown (a catalog that does
	// not track revisions, or an instance not read from a catalog).
	// Register ignores it.
	Revision int64

	// Weight is the instance's share of traffic among the instances of its
	// name: 1 to MaxWeight; zero in a registration is DefaultWeight (100).
	// Weighted picks, the gRPC resolver and the pool spread calls in
	// proportion to it.
	Weight int
	// Zone is the instance's locality (a token such as "eu-west-1a";
	// optional): callers may prefer instances of their own zone.
	Zone string
	// Draining is set by Drainer.Drain, never by Register: the instance
	// stays registered and heartbeating but gets no new traffic (Serving).
	Draining bool
	// Check, when set, is probed by the catalog's check runners; Health
	// holds its last result. Register stores the check (kube://, where
	// the kubelet's probes do this job, refuses it: ErrInvalid); only
	// HealthSetter.SetHealth writes Health (a new row with a check starts
	// critical, "not checked yet", until its first probes pass).
	Check  *Check
	Health Health
}

// HasCapability reports whether c is one of the instance's capabilities.
func (in *Instance) HasCapability(c string) bool {
	for _, x := range in.Capabilities {
		if x == c {
			return true
		}
	}
	return false
}

// Clone returns a deep copy, so a cached instance can be handed out without
// sharing its slices and maps.
func (in Instance) Clone() Instance {
	out := in
	if in.Capabilities != nil {
		out.Capabilities = append([]string(nil), in.Capabilities...)
	}
	if in.Metadata != nil {
		out.Metadata = make(map[string]string, len(in.Metadata))
		for k, v := range in.Metadata {
			out.Metadata[k] = v
		}
	}
	if in.Components != nil {
		out.Components = append(json.RawMessage(nil), in.Components...)
	}
	if in.Check != nil {
		c := *in.Check
		out.Check = &c
	}
	return out
}

// Query selects instances. Empty fields match everything.
type Query struct {
	Name       string
	Type       string
	Capability string
	// All includes every row: stale instances (past their TTL, not yet
	// reaped) and those whose check is critical. Draining instances are
	// always included (they are registered and alive; they only get no
	// new traffic).
	All bool
}

// Matches reports whether in is selected by q, ignoring staleness.
func (q Query) Matches(in *Instance) bool {
	if q.Name != "" && in.Name != q.Name {
		return false
	}
	if q.Type != "" && in.Type != q.Type {
		return false
	}
	if q.Capability != "" && !in.HasCapability(q.Capability) {
		return false
	}
	return true
}

// Selects reports whether a List or Watch of q holds in, taken as stale
// or not (a watcher judges staleness by its own clock): in matches q and,
// unless q.All, is neither stale nor critical.
func (q Query) Selects(in *Instance, stale bool) bool {
	return (q.All || !stale && in.Health.Status != StatusCritical) && q.Matches(in)
}

// RemovalReason is the reason a watcher is given when an instance its
// query selected stops being selected while its row stays: its TTL passed
// (stale: ReasonExpired), its check turned critical (ReasonCheckFailed),
// or it no longer matches the query (ReasonDeregistered, as far as that
// watcher can tell). A nil in is ReasonDeregistered.
func RemovalReason(in *Instance, stale bool) Reason {
	switch {
	case stale:
		return ReasonExpired
	case in != nil && in.Health.Status == StatusCritical:
		return ReasonCheckFailed
	}
	return ReasonDeregistered
}

// EventKind says what happened to an instance.
type EventKind string

// Event kinds. Added, Updated and Removed carry an Instance; Synced marks the
// end of the initial snapshot (and of every resync); Error says the catalog
// could not be reached: the watch goes on, serving what it knew, and resyncs.
const (
	EventAdded   EventKind = "added"
	EventUpdated EventKind = "updated"
	EventRemoved EventKind = "removed"
	EventSynced  EventKind = "synced"
	EventError   EventKind = "error"
)

// Reason says why an instance was removed.
type Reason string

// Removal reasons.
const (
	ReasonDeregistered Reason = "deregistered"
	ReasonExpired      Reason = "expired"
	// ReasonUnknown is a removal learned from a full read of the catalog
	// rather than from its change log (the entry was trimmed, or the
	// catalog was restored): the row is gone, why is not known.
	ReasonUnknown Reason = "unknown"
)

// Event is one change seen by a watcher.
type Event struct {
	Kind     EventKind
	Reason   Reason // for EventRemoved
	Instance Instance
	Err      error // for EventError
	// Revision is the catalog version the event brings the watcher to for
	// this instance: Instance.Revision for added and updated; for removed,
	// the deletion's own log position, or the instance's last revision when
	// the removal was learned without the log (an expiry judged by the
	// watcher's clock, a resync). Per instance, the revisions a watcher
	// sees never decrease. Zero when the catalog does not track versions.
	Revision int64
	// Position, when not empty, is a point of the catalog's history this
	// event leaves its watcher at: a watch resumed from it
	// (WatchResumer.WatchFrom) misses no change after it. Opaque; empty on
	// events that are no such point (those of an initial snapshot before
	// its EventSynced, of a catch-up before its end) and on catalogs that
	// cannot resume watches.
	Position string
}

// Catalog is the registry every backend implements. Implementations are safe
// for concurrent use.
type Catalog interface {
	// Register validates and upserts in (by ID; a new UUID when empty),
	// stamps RegisteredAt (kept on update) and LastSeen with the catalog's
	// clock, and returns the stored instance.
	Register(ctx context.Context, in Instance) (Instance, error)
	// Heartbeat renews LastSeen of every id in one round trip and returns
	// the ids that have no row (reaped, deregistered, catalog restored), so
	// the caller can register them again. A heartbeat is not a change for
	// watchers, except when it revives a row that had gone stale: then
	// watchers see the instance added again at once.
	Heartbeat(ctx context.Context, ids ...string) (missing []string, err error)
	// Deregister deletes the row; ErrNotFound when there is none.
	Deregister(ctx context.Context, id string) error
	// Get returns one instance, stale or not; ErrNotFound when there is none.
	Get(ctx context.Context, id string) (Instance, error)
	// List returns the instances selected by q, ordered by name then id.
	List(ctx context.Context, q Query) ([]Instance, error)
	// Watch streams the instances selected by q: first the current set as
	// EventAdded, then EventSynced, then changes until ctx ends, when the
	// channel is closed. A heartbeat alone is not a change; an instance past
	// its TTL is removed with ReasonExpired (for q.All, updated with Stale).
	// An event's Instance may share its Capabilities, Metadata and
	// Components with other watchers of the same handle: treat them as
	// read-only (Clone before modifying).
	Watch(ctx context.Context, q Query) (<-chan Event, error)
	// Reap deletes rows whose LastSeen is older than olderThan, or, when
	// olderThan is zero, older than twice their own TTL. It returns how many
	// rows it deleted. Reaping is idempotent and safe from every process.
	Reap(ctx context.Context, olderThan time.Duration) (int, error)
	// Now returns the catalog's clock.
	Now(ctx context.Context) (time.Time, error)
	// Close releases the catalog; it is idempotent.
	Close() error
}

// TTLDefaulter is implemented by catalogs that know, before they store an
// instance registered without a TTL, the TTL they give it (both SQL
// backends and kube: Options.DefaultTTL as stored; remote: what its server
// says). Bootstrap checks a heartbeat interval against it before anything
// is written, and again after the write if the stored TTL differs from
// the one told (a remote catalog's servers may differ). DefaultTTL returns
// zero when the catalog cannot tell (remote, with a server that does not
// say); then, as with a catalog that does not implement it, the check can
// come only after the write, which a refusal then undoes.
type TTLDefaulter interface {
	DefaultTTL() time.Duration
}

// Lease is a named, time-bounded claim held by one holder. Token grows with
// every new term (fencing): a write carrying an older token is stale. A term
// starts when a holder takes a free, released or expired lease, the same
// holder again after its lease expired or was released included. TTL is in
// whole milliseconds; a released lease is listed with an empty Holder, its
// last token, and ExpiresAt the time of release.
type Lease struct {
	Name      string
	Holder    string
	Token     int64
	TTL       time.Duration
	ExpiresAt time.Time // catalog clock
}

// Leaser is implemented by catalogs that offer leases (both SQL backends,
// with identical semantics: catalogtest.RunLeases).
// Expiry is judged by the catalog's clock only: a lease is expired once the
// catalog's now has reached ExpiresAt. Every TTL is rounded up to whole
// milliseconds (and one past the largest whole-millisecond Duration, about
// 292 years, is cut to it); one under a millisecond, or negative, is
// ErrInvalid, and so is an empty name or holder.
type Leaser interface {
	// Acquire takes the lease if it is free, released, expired, or already
	// held by holder (then it renews without a new token, with the new
	// ttl). ErrLeaseHeld otherwise. ttl < 1ms is ErrInvalid.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// Renew extends a lease still held with the same holder and token, by
	// l.TTL from the catalog's now; a zero l.TTL renews it by its stored
	// TTL. ErrLeaseLost when it expired, was released, or someone else
	// holds it now.
	Renew(ctx context.Context, l Lease) (Lease, error)
	// Release gives the lease up if still held with that holder and token:
	// it is free at once and keeps its token, so the next holder's is
	// higher. Releasing it again with the same token, or after it expired
	// with nobody taking it over, is a no-op (nil). ErrLeaseLost when
	// another term has begun since (a different token), another holder
	// holds this one, or there is no such lease.
	Release(ctx context.Context, l Lease) error
	// Leases lists every lease row, by name, released ones included. A
	// row released or expired long ago (an hour on both SQL backends) is
	// dropped by a reap; a lease taken again under its name starts above
	// every token it had, so tokens never go back.
	Leases(ctx context.Context) ([]Lease, error)
}

// WatchStats describes the watch machinery of a catalog handle: what it
// mirrors, whether the catalog is reachable, and self-preservation.
type WatchStats struct {
	Instances int // rows mirrored, stale included
	Active    int // rows not expired
	Draining  int // rows drained (out of rotation)
	Critical  int // rows not drained whose check is critical
	Watchers  int
	Healthy   bool  // the last read of the catalog succeeded
	LastError error // the error that made it unhealthy
	// Preserving is true while self-preservation holds expirations;
	// HeldExpirations counts the instances held.
	Preserving      bool
	HeldExpirations int
	// SelfPreservationEvents counts how many times it engaged.
	SelfPreservationEvents int
	// MissedRenewals counts, at the last expiry check, the instances that
	// had not renewed for half their TTL plus those expired within their
	// last TTL: what self-preservation compares with its threshold.
	MissedRenewals int
	// WaitingFor is the oldest change the watch has seen a later change
	// of while it has not seen it (its writer drew the number and has not
	// committed yet, or is rolling back), and WaitingSince how long it has
	// been waited for; 0 when none. Changes after it are delivered
	// meanwhile: only its own change waits.
	WaitingFor   int64
	WaitingSince time.Duration
	// Server is the server a client of `switchboard serve` (an http://
	// DSN) asks now, which answered these figures; "" for other catalogs.
	Server string
}

// WatchStatser is implemented by catalogs that report their WatchStats
// (the SQL backends).
type WatchStatser interface {
	WatchStats() WatchStats
}
