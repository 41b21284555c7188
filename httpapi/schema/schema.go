// Package schema holds the JSON shapes, error codes and headers of the
// HTTP API of `switchboard serve`, shared by the server (httpapi) and the
// remote catalog (remote), so a client links neither the server nor its
// metrics.
package schema

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/switchboard-io/switchboard"
)

// Error codes of the JSON error body ({"error": …, "field": …, "code": …}).
// Clients branch on code; the message is for people.
const (
	CodeInvalid        = "invalid"
	CodeInvalidName    = "invalid_name"
	CodeInvalidAddress = "invalid_address"
	CodeTooLarge       = "too_large"
	CodeUnauthorized   = "unauthorized"
	CodeForbidden      = "forbidden"
	CodeNotFound       = "not_found"
	CodeLeaseHeld      = "lease_held"
	CodeLeaseLost      = "lease_lost"
	CodeUnavailable    = "unavailable"
	CodeMethod         = "method_not_allowed"
	// CodeNoCatalog (503) is switchboard.ErrNoCatalog: there is no
	// catalog where the server looks (its file or tables are missing).
	// Retrying alone does not help: an operator must act, or, on
	// PostgreSQL, the next registration or heartbeat creates the tables.
	CodeNoCatalog = "no_catalog"
	// CodeBusy (503, with a Retry-After header in seconds) is
	// switchboard.ErrBusy: a write waited its whole time for a lock
	// another process holds; it did not happen. Retry after the delay.
	CodeBusy = "busy"
	// CodeUnsupportedMedia (415) is a request body not sent as
	// Content-Type: application/json.
	CodeUnsupportedMedia = "unsupported_media_type"
	// CodeTooMany (429, with a Retry-After header in seconds) is a quota
	// of the server reached: instances, leases or watch streams.
	CodeTooMany = "too_many_requests"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	Code  string `json:"code"`
	// Value and Reason are those of a switchboard.FieldError (the value
	// cut at 256 bytes), so a Go client can give the caller the same
	// FieldError a backend returns.
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Quota and Limit say, on a 429 (too_many_requests), which quota was
	// reached, named as its setting in the server's [http] section
	// (max_instances, max_instances_per_token, …), and its limit.
	Quota string `json:"quota,omitempty"`
	Limit int64  `json:"limit,omitempty"`
}

// SecretHeader carries an instance's secret.
const SecretHeader = "X-Instance-Secret"

// NewSecret returns a new random secret of the form the server issues
// (for a registration or a lease) and a client may choose for itself: 32
// random bytes, base64url without padding.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LeaseSecretHeader carries a lease's secret (LeaseRequest.Secret) when
// the body does not: a server of an earlier release refuses a body with a
// secret (a field it does not know) and ignores the header, so a client
// that sends its secret there acquires through either.
const LeaseSecretHeader = "X-Lease-Secret"

// RegisterResponse is the body of a successful PUT /v1/instances.
type RegisterResponse struct {
	Instance switchboard.Instance `json:"instance"`
	// Secret authorises heartbeats, deregistration and re-registration of
	// this id. It is returned only here, never listed.
	Secret string `json:"secret"`
}

// HeartbeatRequest is the body of POST /v1/heartbeats: many instances
// renewed in one request (and, with other clients' requests, one
// statement).
type HeartbeatRequest struct {
	Instances []HeartbeatItem `json:"instances"`
}

// HeartbeatItem is one instance of a HeartbeatRequest.
type HeartbeatItem struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// ReapResponse is the body of a successful POST /v1/reap.
type ReapResponse struct {
	Reaped int `json:"reaped"`
	// ReapsEvery is the period of the server's own reaper ("10s"), absent
	// when it has none. A client's Bootstrap leaves reaping to a server
	// that reaps by itself (remote.Client.ReapGrace).
	ReapsEvery string `json:"reaps_every,omitempty"`
}

// HeartbeatResponse lists the ids that have no row (register them again)
// and those whose secret was missing or wrong (another client's row, for
// example one that re-registered the id after it expired): those are not
// renewed, the others are.
type HeartbeatResponse struct {
	Missing []string      `json:"missing"`
	Refused []RefusedItem `json:"refused,omitempty"`
}

// RefusedItem is an id of a heartbeat that was not renewed: code
// unauthorized (no secret sent) or forbidden (a wrong one).
type RefusedItem struct {
	ID    string `json:"id"`
	Code  string `json:"code"`
	Error string `json:"error"`
}

// NowResponse is the body of GET /v1/now: the catalog's clock.
type NowResponse struct {
	Now time.Time `json:"now"`
}

// LeaseJSON is a lease on the wire: ttl as a Go duration ("15s"), times in
// RFC 3339 with nanoseconds (fencing compares them exactly), held computed
// on the catalog's clock.
type LeaseJSON struct {
	Name      string    `json:"name"`
	Holder    string    `json:"holder"`
	Token     int64     `json:"token"`
	TTL       string    `json:"ttl"`
	ExpiresAt time.Time `json:"expires_at"`
	Held      bool      `json:"held"`
	// Secret is returned by acquire alone: the secret the lease was taken
	// with (the client's own; none when it sent none), which must be sent
	// to renew, release or acquire the lease again as the same holder. It
	// is never listed.
	Secret string `json:"secret,omitempty"`
}

// LeaseNextHeader, on a page of GET /v1/leases, is the name to pass as
// ?after= for the next page; absent on the last page.
const LeaseNextHeader = "X-Next-After"

// LeaseRequest is the body of acquire (name, holder, ttl), renew (the
// lease as held; ttl "" or "0s" renews by the stored TTL) and release.
// Secret (16 to 256 printable ASCII characters), in the body or in
// LeaseSecretHeader, is the client's own: acquire takes a new term with
// it (without one, the server issues one, in the answer), and renew,
// release and acquiring again as the same holder need it.
type LeaseRequest struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
	Token  int64  `json:"token"`
	TTL    string `json:"ttl"`
	Secret string `json:"secret,omitempty"`
}

// Info is the body of GET /v1/info: what the server serves and how it is.
type Info struct {
	// Version is the server's release ("switchboard v1.2.0 (revision …)"),
	// absent from servers older than the field and when not configured.
	Version string `json:"version,omitempty"`
	Backend string `json:"backend"` // the catalog's DSN scheme: sqlite, postgres, …
	DSN     string `json:"dsn"`     // with any password redacted
	Healthy bool   `json:"healthy"` // the server's mirror of the catalog is current
	Error   string `json:"error,omitempty"`
	// Instances counts the mirrored instances.
	Instances struct {
		Active int `json:"active"`
		Stale  int `json:"stale"`
	} `json:"instances"`
	Subscribers int `json:"subscribers"` // open SSE watch streams
	// DefaultTTL is the TTL the catalog gives an instance registered
	// without one ("10s"), absent when the catalog does not say
	// (switchboard.TTLDefaulter). A client checks a heartbeat interval
	// against it before it registers (remote.Client.DefaultTTL).
	DefaultTTL string `json:"default_ttl,omitempty"`
	// SelfPreservation is present when the catalog reports its watch
	// machinery (the SQL backends).
	SelfPreservation *SelfPreservation `json:"self_preservation,omitempty"`
}

// SelfPreservation is the hub's Eureka-style expiry guard.
type SelfPreservation struct {
	Active          bool `json:"active"`
	HeldExpirations int  `json:"held_expirations"`
	Events          int  `json:"events"`
}
