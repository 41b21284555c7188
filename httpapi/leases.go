package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// A lease taken through the API carries a secret, issued on acquire and
// stored hashed (secrets.go) in the catalog's holder column after the
// holder's name and holderSep: every server on the same database reads it
// from there, and the catalog's own rule that only the holder as stored
// may renew or release makes the secret part of the holder. Renewing,
// releasing, or acquiring again as the same holder while the lease is held
// needs the secret. The API never shows what follows holderSep, and
// refuses a holder that contains it. A lease stored by an earlier release
// (no holderSep) has no secret, as before, until its next term. The
// secret's salt carries the tag of the credential that took the lease
// (secrets.go), for the per-credential quota of leases.
const holderSep = "\x1f"

// holderReserve is what the stored secret adds to a holder: holderSep
// and hashSecret's form with a tag. A holder longer than MaxLeaseHolder
// less this (921 bytes) has no room for it: its lease is taken without a
// secret, as a lease of an earlier release, and the answer carries none;
// where a per-credential quota of leases applies such a holder is refused
// (400), as its lease could not be counted.
var holderReserve = len(holderSep) + len(hashSecret("", strings.Repeat("t", tagLen)))

// splitHolder returns the holder's name and its stored secret ("" for a
// lease without one).
func splitHolder(stored string) (name, hash string) {
	name, hash, _ = strings.Cut(stored, holderSep)
	return name, hash
}

func leaseJSON(l switchboard.Lease, now time.Time) LeaseJSON {
	holder, _ := splitHolder(l.Holder)
	return LeaseJSON{Name: l.Name, Holder: holder, Token: l.Token, TTL: l.TTL.String(),
		ExpiresAt: l.ExpiresAt, Held: l.Holder != "" && l.ExpiresAt.After(now)}
}

func (s *Server) leaser() (switchboard.Leaser, error) {
	l, ok := s.cat.(switchboard.Leaser)
	if !ok {
		return nil, &apiError{status: http.StatusNotImplemented, body: ErrorBody{Error: "this server's catalog offers no leases", Code: "not_implemented"}}
	}
	return l, nil
}

// Paging of GET /v1/leases.
const (
	leasePageDefault = 500
	leasePageMax     = 1000
)

// handleLeases lists the leases by name, a page at a time: ?limit= (at
// most 1,000, default 500) from the name after ?after=; the header
// X-Next-After names where the next page starts.
func (s *Server) handleLeases(w http.ResponseWriter, r *http.Request) error {
	q, err := params(r, "limit", "after")
	if err != nil {
		return err
	}
	limit := leasePageDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > leasePageMax {
			return badRequest("limit", fmt.Sprintf("limit=%q: want a whole number from 1 to %d", v, leasePageMax))
		}
		limit = n
	}
	after := q.Get("after")
	l, err := s.leaser()
	if err != nil {
		return err
	}
	var list []switchboard.Lease
	lr, paged := l.(switchboard.LeaseReader)
	if paged {
		// In the catalog's own order, one more than the page: is there a
		// next page?
		list, err = lr.LeasesAfter(r.Context(), after, limit+1)
	} else {
		list, err = l.Leases(r.Context())
	}
	if err != nil {
		return err
	}
	now, err := s.cat.Now(r.Context())
	if err != nil {
		return err
	}
	out := make([]LeaseJSON, 0, min(limit, len(list)))
	for _, le := range list {
		if !paged && after != "" && le.Name <= after {
			continue
		}
		if len(out) == limit { // another lease follows the page
			w.Header().Set(LeaseNextHeader, out[len(out)-1].Name)
			break
		}
		out = append(out, leaseJSON(le, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// leaseRequest finds the catalog's leases and decodes the request's lease
// (name, holder, token, ttl, secret): what acquire, renew and release all
// start with. The secret comes from the body, else from the
// LeaseSecretHeader. The ttl is at most MaxLeaseTTL.
func (s *Server) leaseRequest(w http.ResponseWriter, r *http.Request) (switchboard.Leaser, LeaseRequest, time.Duration, error) {
	l, err := s.leaser()
	if err != nil {
		return nil, LeaseRequest{}, 0, err
	}
	var req LeaseRequest
	b, err := s.readBody(w, r)
	if err != nil {
		return nil, req, 0, err
	}
	if err := strictUnmarshal(b, &req); err != nil {
		return nil, req, 0, err
	}
	if req.Secret == "" {
		req.Secret = r.Header.Get(LeaseSecretHeader)
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil {
			return nil, req, 0, badRequest("ttl", "ttl "+req.TTL+": want a duration like 15s")
		}
	}
	if ttl > s.opts.MaxLeaseTTL {
		return nil, req, 0, badRequest("ttl", fmt.Sprintf("ttl %s: at most %s (the server's max_lease_ttl); renew the lease instead", ttl, s.opts.MaxLeaseTTL))
	}
	if err := switchboard.ValidateLease(req.Name, req.Holder); err != nil {
		return nil, req, 0, err
	}
	switch {
	case strings.Contains(req.Holder, holderSep):
		return nil, req, 0, badRequest("holder", "lease holder must not contain the control character U+001F")
	case req.Secret != "" && !validSecret(req.Secret):
		return nil, req, 0, badRequest("secret", "lease secret must be 16 to 256 printable ASCII characters")
	}
	return l, req, ttl, nil
}

// current returns the lease named name as stored, whether there is one,
// and, when there is none, how many leases there are (for MaxLeases). A
// catalog that is a LeaseReader reads that lease and counts; another is
// listed whole.
func current(ctx context.Context, l switchboard.Leaser, name string) (switchboard.Lease, bool, int, error) {
	if lr, ok := l.(switchboard.LeaseReader); ok {
		le, err := lr.Lease(ctx, name)
		switch {
		case err == nil:
			return le, true, 0, nil
		case !errors.Is(err, switchboard.ErrNotFound):
			return switchboard.Lease{}, false, 0, err
		}
		n, err := lr.LeaseCount(ctx)
		return switchboard.Lease{}, false, n, err
	}
	list, err := l.Leases(ctx)
	if err != nil {
		return switchboard.Lease{}, false, 0, err
	}
	for _, le := range list {
		if le.Name == name {
			return le, true, len(list), nil
		}
	}
	return switchboard.Lease{}, false, len(list), nil
}

// leasesHeld counts the leases held (not released, not expired by the
// catalog's clock) that the credential of tag took: a reading of every
// lease row, a page at a time on a catalog that pages them. It runs only
// when such a credential takes a new term, never for renewals.
func (s *Server) leasesHeld(ctx context.Context, l switchboard.Leaser, tag string) (int, error) {
	now, err := s.cat.Now(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	count := func(list []switchboard.Lease) {
		for _, le := range list {
			if _, hash := splitHolder(le.Holder); secretTag(hash) == tag && le.Holder != "" && le.ExpiresAt.After(now) {
				n++
			}
		}
	}
	lr, ok := l.(switchboard.LeaseReader)
	if !ok {
		list, err := l.Leases(ctx)
		count(list)
		return n, err
	}
	for after := ""; ; {
		list, err := lr.LeasesAfter(ctx, after, leasePageMax)
		if err != nil {
			return 0, err
		}
		count(list)
		if len(list) < leasePageMax {
			return n, nil
		}
		after = list[len(list)-1].Name
	}
}

// The errors of leases say what happened without naming another holder
// or its token.
func errHeld(name string) error {
	return fmt.Errorf("lease %q is held by another holder (or by this holder with another secret): %w", name, switchboard.ErrLeaseHeld)
}

func errLost(name string) error {
	return fmt.Errorf("lease %q is no longer held by this holder with this token and secret (expired, released or taken over): %w", name, switchboard.ErrLeaseLost)
}

func (s *Server) leaseReply(w http.ResponseWriter, r *http.Request, le switchboard.Lease, secret string) error {
	now, err := s.cat.Now(r.Context())
	if err != nil {
		return err
	}
	out := leaseJSON(le, now)
	out.Secret = secret
	writeJSON(w, http.StatusOK, out)
	return nil
}

// stealRefused logs an attempt on a lease held by another secret.
func (s *Server) stealRefused(r *http.Request, op string, req LeaseRequest) {
	s.audit(r, slog.LevelWarn, "audit: lease steal refused", slog.String("op", op), slog.String("lease", req.Name), slog.String("holder", req.Holder))
}

func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request) error {
	l, req, ttl, err := s.leaseRequest(w, r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	cur, found, n, err := current(ctx, l, req.Name)
	if err != nil {
		return err
	}
	if !found && n >= s.opts.MaxLeases {
		return tooMany("max_leases", int64(s.opts.MaxLeases), fmt.Sprintf("the catalog holds %d leases, this server's limit (http.max_leases)", n))
	}
	now, err := s.cat.Now(ctx)
	if err != nil {
		return err
	}
	if found && cur.Holder != "" && cur.ExpiresAt.After(now) {
		holder, hash := splitHolder(cur.Holder)
		if holder != req.Holder {
			return errHeld(req.Name)
		}
		if hash != "" && !secretMatches(hash, req.Secret) {
			s.stealRefused(r, "acquire", req)
			return errHeld(req.Name)
		}
		// The holder's own term: acquiring renews it, secret unchanged.
		le, err := l.Acquire(ctx, req.Name, cur.Holder, ttl)
		if err != nil {
			return s.leaseErr(req.Name, err)
		}
		return s.leaseReply(w, r, le, req.Secret)
	}
	// A new term: the lease is free, released or expired. Its secret is
	// the one the client sent (the body's, or LeaseSecretHeader's), else
	// one issued here and answered: renewing and releasing the lease need
	// it, so no client that read its holder and token can take it over.
	cred := s.credentialOf(r)
	counted := s.opts.MaxLeasesPerToken > 0 && !cred.exempt()
	secret, stored := req.Secret, req.Holder
	switch {
	case len(req.Holder)+holderReserve > switchboard.MaxLeaseHolder && counted:
		return badRequest("holder", fmt.Sprintf("lease holder of %d bytes: at most %d on this server, whose leases count to the credential that takes them (http.max_leases_per_token)",
			len(req.Holder), switchboard.MaxLeaseHolder-holderReserve))
	case len(req.Holder)+holderReserve > switchboard.MaxLeaseHolder:
		// No room for a secret (see holderReserve): stored as a lease of
		// an earlier release.
		if secret != "" {
			s.log.Warn("lease taken without a secret: its holder leaves no room for one", "lease", req.Name, "holder_bytes", len(req.Holder))
		}
		secret = ""
	default:
		if secret == "" {
			secret = schema.NewSecret()
		}
		stored += holderSep + hashSecret(secret, cred.tag)
	}
	release, err := s.credentialLeaseQuota(cred, func() (int, error) { return s.leasesHeld(ctx, l, cred.tag) })
	if err != nil {
		return err
	}
	defer release()
	le, err := l.Acquire(ctx, req.Name, stored, ttl)
	if err != nil {
		return s.leaseErr(req.Name, err)
	}
	return s.leaseReply(w, r, le, secret)
}

// leaseErr is err of the catalog without what it may say of another
// holder.
func (s *Server) leaseErr(name string, err error) error {
	switch {
	case errors.Is(err, switchboard.ErrLeaseHeld):
		return errHeld(name)
	case errors.Is(err, switchboard.ErrLeaseLost):
		return errLost(name)
	}
	return err
}

// owned checks that req is the holder of cur with its secret, and returns
// the holder as stored. The administrator may pass for any holder when
// admin is set.
func (s *Server) owned(r *http.Request, op string, cur switchboard.Lease, found bool, req LeaseRequest) (string, error) {
	if !found || cur.Holder == "" {
		return "", errLost(req.Name)
	}
	holder, hash := splitHolder(cur.Holder)
	if holder != req.Holder {
		return "", errLost(req.Name)
	}
	if hash != "" && !secretMatches(hash, req.Secret) {
		s.stealRefused(r, op, req)
		return "", errLost(req.Name)
	}
	return cur.Holder, nil
}

func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request) error {
	l, req, ttl, err := s.leaseRequest(w, r)
	if err != nil {
		return err
	}
	cur, found, _, err := current(r.Context(), l, req.Name)
	if err != nil {
		return err
	}
	stored, err := s.owned(r, "renew", cur, found, req)
	if err != nil {
		return err
	}
	le, err := l.Renew(r.Context(), switchboard.Lease{Name: req.Name, Holder: stored, Token: req.Token, TTL: ttl})
	if err != nil {
		return s.leaseErr(req.Name, err)
	}
	return s.leaseReply(w, r, le, "")
}

// handleRelease releases the lease for its holder (with its secret), or,
// for the administrator, whoever holds it (its current term when no token
// is given).
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	l, req, _, err := s.leaseRequest(w, r)
	if err != nil {
		return err
	}
	cur, found, _, err := current(r.Context(), l, req.Name)
	if err != nil {
		return err
	}
	if found && cur.Holder == "" && cur.Token == req.Token {
		return s.released(w, r, req, false) // already released: a no-op, as the catalog says
	}
	stored, err := s.owned(r, "release", cur, found, req)
	admin := false
	if err != nil {
		if roleOf(r) != roleAdmin || !found || cur.Holder == "" {
			return err
		}
		stored, admin = cur.Holder, true
		if req.Token == 0 {
			req.Token = cur.Token
		}
	}
	if err := l.Release(r.Context(), switchboard.Lease{Name: req.Name, Holder: stored, Token: req.Token}); err != nil {
		return s.leaseErr(req.Name, err)
	}
	return s.released(w, r, req, admin)
}

func (s *Server) released(w http.ResponseWriter, r *http.Request, req LeaseRequest, byAdmin bool) error {
	s.audit(r, slog.LevelInfo, "audit: lease released", slog.String("lease", req.Name), slog.String("holder", req.Holder),
		slog.Int64("token", req.Token), slog.Bool("by_admin", byAdmin))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
