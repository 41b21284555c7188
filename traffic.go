package switchboard

import (
	"context"
	"fmt"
	"time"
)

// Traffic limits.
const (
	// DefaultWeight is the weight of an instance registered without one.
	DefaultWeight = 100
	// MaxWeight is the largest weight.
	MaxWeight = 10000
	// MaxHealthOutput bounds the stored output of a check (bytes).
	MaxHealthOutput = 1024
)

// Status is an instance's traffic state in one word, as ls, the dashboard,
// metrics and DNS show it.
type Status string

// Statuses. A check's result (Health.Status) is passing, warning or
// critical; Instance.Status adds draining, which overrides them.
const (
	// StatusPassing: the instance gets traffic (no check, or its check
	// passes).
	StatusPassing Status = "passing"
	// StatusWarning: the check answered that the instance is overloaded
	// (HTTP 429); it still gets traffic, as Consul's warning state does.
	StatusWarning Status = "warning"
	// StatusCritical: the check fails. The instance gets no traffic and
	// leaves List and Watch (removed with ReasonCheckFailed) unless the
	// query asks for every row (Query.All); it comes back as added when
	// the check passes again.
	StatusCritical Status = "critical"
	// StatusDraining: the instance was drained (Drainer.Drain): it stays
	// registered, heartbeating, listed and watched (the change is one
	// EventUpdated), and gets no new traffic.
	StatusDraining Status = "draining"
)

// Health is the last result of an instance's check. Its zero value (no
// check) is passing.
type Health struct {
	// Status is StatusPassing, StatusWarning or StatusCritical; empty
	// means no check has judged the instance (passing).
	Status Status
	// Output is what the check last said (a status line, an error), cut
	// to MaxHealthOutput bytes.
	Output string
	// Since is when Status last changed, by the catalog's clock.
	Since time.Time
}

// Removal reasons of checks.
const (
	// ReasonCheckFailed: the instance's check turned critical; the row
	// stays (Query.All lists it) and comes back as added when it passes.
	ReasonCheckFailed Reason = "check_failed"
	// ReasonCheckCritical: the row was deleted after its check had been
	// critical for Check.DeregisterAfter.
	ReasonCheckCritical Reason = "check_critical"
)

// Serving reports whether the instance should get traffic: not stale, not
// draining, and its check (if any) not critical. Lookups, picks, the gRPC
// resolver, the connection pool and DNS all ask this one question.
func (in *Instance) Serving() bool {
	return !in.Stale && !in.Draining && in.Health.Status != StatusCritical
}

// Status returns the instance's traffic state: draining when drained,
// otherwise its check's status (passing without a check). Staleness is
// separate (Instance.Stale).
func (in *Instance) Status() Status {
	switch {
	case in.Draining:
		return StatusDraining
	case in.Health.Status == "":
		return StatusPassing
	}
	return in.Health.Status
}

// TrafficWeight is the instance's weight, DefaultWeight when unset (an
// instance not read from a catalog).
func (in *Instance) TrafficWeight() int {
	if in.Weight <= 0 {
		return DefaultWeight
	}
	return in.Weight
}

// Drainer is implemented by catalogs that can take an instance out of
// rotation without deregistering it (both SQL backends, kube://, remote).
type Drainer interface {
	// Drain sets (draining true) or clears the instance's draining state
	// and returns the stored instance. A change is one EventUpdated on
	// every watcher; setting the state it already has writes nothing.
	// ErrNotFound when there is no such row.
	Drain(ctx context.Context, id string, draining bool) (Instance, error)
}

// HealthSetter is implemented by catalogs that store check results (both
// SQL backends; the check runners of `switchboard serve` write through the
// server's own catalog). A check runner calls it when a check's status
// changes.
type HealthSetter interface {
	// SetHealth records h (Since is stamped with the catalog's clock when
	// the status changes) and returns the stored instance. A change of
	// status is a change for watchers: to critical, watchers of the
	// default query see the instance removed (ReasonCheckFailed); from
	// critical, added. ErrNotFound when there is no such row; ErrInvalid
	// for a status other than passing, warning or critical.
	SetHealth(ctx context.Context, id string, h Health) (Instance, error)
}

// validateTraffic checks and fills the traffic fields of a registration:
// weight (zero is DefaultWeight), zone, and the check.
func validateTraffic(in *Instance) error {
	switch {
	case in.Weight == 0:
		in.Weight = DefaultWeight
	case in.Weight < 0 || in.Weight > MaxWeight:
		return invalid(ErrInvalid, "weight", fmt.Sprint(in.Weight), fmt.Sprintf("must be from 1 to %d", MaxWeight))
	}
	if in.Zone != "" && !isCapability(in.Zone) {
		return invalid(ErrInvalid, "zone", in.Zone, tokenRule)
	}
	if in.Check != nil {
		c, err := in.Check.normalize()
		if err != nil {
			return err
		}
		in.Check = &c
	}
	return validateHealth(in.Health)
}

// validateHealth checks a stored or reported health.
func validateHealth(h Health) error {
	switch h.Status {
	case "", StatusPassing, StatusWarning, StatusCritical:
	default:
		return invalid(ErrInvalid, "health.status", string(h.Status), "must be passing, warning or critical")
	}
	return nil
}

// Remover is implemented by catalogs that record why a row was deleted
// (both SQL backends). A check runner deletes a row critical for longer
// than its check's DeregisterAfter with ReasonCheckCritical, which every
// watcher then sees as the removal's reason.
type Remover interface {
	// Remove deletes the row as Deregister does, logging reason as the
	// removal's: ReasonDeregistered or ReasonCheckCritical (anything else
	// is ErrInvalid, and nothing is deleted). ErrNotFound when there is
	// no row.
	Remove(ctx context.Context, id string, reason Reason) error
}
