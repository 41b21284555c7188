package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// secretKey is the reserved metadata key under which an instance's
// secret is stored hashed (secrets.go) with its row: it lives and dies with
// the row, is shared by every server on the same database, and is stripped
// from every response and event of the API.
const secretKey = "switchboard.secret-sha256"

// owner is what the server knows of a row's ownership.
type owner struct {
	hash  string // the secret as stored (secrets.go); empty for a row registered directly on the backend
	stale bool   // past its TTL: its owner stopped heartbeating
	found bool
}

// owner returns the ownership of id's row: from the mirror when it has the
// row, else from the catalog (a row this server has not seen yet).
func (s *Server) owner(ctx context.Context, id string) (owner, error) {
	if o, ok := s.feed.owner(id); ok {
		return o, nil
	}
	return s.catalogOwner(ctx, id)
}

// checkSecret enforces ownership: a row registered through the API has a
// secret hash and only the holder of the secret may renew, re-register or
// delete it. A row registered directly on the backend has none.
func checkSecret(id, hash, given string) error {
	if hash == "" {
		return nil
	}
	if given == "" {
		return unauthorized(fmt.Sprintf("instance %q belongs to the client that registered it: send its secret in %s", id, SecretHeader))
	}
	if !secretMatches(hash, given) {
		return forbidden(fmt.Sprintf("wrong secret for instance %q", id))
	}
	return nil
}

func strip(in switchboard.Instance) switchboard.Instance {
	if _, ok := in.Metadata[secretKey]; ok {
		in = in.Clone()
		delete(in.Metadata, secretKey)
	}
	return in
}

// instanceFields are the keys an instance body may have; anything else is
// a typo the caller should hear about.
var instanceFields = map[string]bool{
	"id": true, "name": true, "type": true, "address": true, "capabilities": true, "version": true,
	"metadata": true, "components": true, "ttl": true, "registered_at": true, "last_seen": true, "stale": true,
	"revision": true, "weight": true, "zone": true, "check": true, "draining": true, "status": true, "health": true,
}

// DecodeInstance reads an instance body: one JSON object of the
// instance's fields (registered_at, last_seen, stale and revision are
// accepted and ignored: the catalog stamps them; so are draining, status
// and health, which drain and the check runners set). Unknown fields and trailing data are
// errors naming what is wrong.
func DecodeInstance(b []byte) (switchboard.Instance, error) {
	var fields map[string]json.RawMessage
	if err := strictUnmarshal(b, &fields); err != nil {
		return switchboard.Instance{}, err
	}
	if fields == nil {
		return switchboard.Instance{}, badRequest("", "body must be a JSON object")
	}
	for k := range fields {
		if !instanceFields[k] {
			return switchboard.Instance{}, badRequest(k, fmt.Sprintf("unknown field %q", k))
		}
	}
	var in switchboard.Instance
	if err := json.Unmarshal(b, &in); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return in, typeError(ute)
		}
		return in, badRequest("", "malformed instance: "+err.Error())
	}
	in.RegisteredAt, in.LastSeen, in.Stale, in.Revision = time.Time{}, time.Time{}, false, 0
	in.Draining, in.Health = false, switchboard.Health{} // set by drain and by the check runners
	if _, ok := in.Metadata[secretKey]; ok {
		return in, badRequest("metadata", "metadata key "+secretKey+" is reserved")
	}
	return in, nil
}

// strictUnmarshal decodes exactly one JSON value.
func strictUnmarshal(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return badRequest("", "empty body: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return typeError(ute)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			f, _ = strconv.Unquote(f)
			return badRequest(f, fmt.Sprintf("unknown field %q", f))
		}
		return badRequest("", "malformed JSON body: "+err.Error())
	}
	if dec.More() {
		return badRequest("", "trailing data after the JSON body")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "trailing data after the JSON body")
	}
	return nil
}

// typeError says which JSON type a body or field should have been, in
// the terms of JSON (object, array, …), not of the server's Go types.
func typeError(ute *json.UnmarshalTypeError) error {
	if ute.Field == "" {
		return badRequest("", "body must be a JSON "+jsonKind(ute.Type))
	}
	return badRequest(ute.Field, fmt.Sprintf("field %q: want a JSON %s", ute.Field, jsonKind(ute.Type)))
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value of another type"
	}
	switch t.Kind() {
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "value of another type"
}

// readBody reads the request body within BodyTimeout. The HTTP server
// cannot bound it (its ReadTimeout would also end every SSE stream), and a
// client that sends its body a byte at a time would otherwise hold its
// connection and handler for ever.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	b, err := io.ReadAll(r.Body)
	if err != nil {
		// The deadline stays: the server must not wait for the rest of
		// the body either.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, badRequest("", fmt.Sprintf("reading the body: not received within %s", s.opts.BodyTimeout))
		}
		return nil, badRequest("", "reading the body: "+err.Error())
	}
	// No deadline for the rest of the request: the server's read that
	// watches for the client going away (already pending when the request
	// has no body) would cancel the request when it passed.
	rc.SetReadDeadline(time.Time{})
	return b, nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r)
	if err != nil {
		return err
	}
	list, err := s.cat.List(r.Context(), q)
	if err != nil {
		return err
	}
	for i := range list {
		list[i] = strip(list[i])
	}
	if list == nil {
		list = []switchboard.Instance{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) error {
	in, err := s.cat.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, strip(in))
	return nil
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	in, err := DecodeInstance(b)
	if err != nil {
		return err
	}
	if in.Check != nil && s.opts.CheckPolicy != nil {
		if err := s.opts.CheckPolicy(in); err != nil {
			return err
		}
	}
	given := r.Header.Get(SecretHeader)
	if given != "" && !validSecret(given) {
		return badRequest(SecretHeader, SecretHeader+" must be 16 to 256 printable ASCII characters")
	}
	secret := given
	kept := "" // the row's stored secret, when the same secret registers it again
	cred := s.credentialOf(r)
	var release func() // of the credential's quota, once the mirror shows the row
	if in.ID != "" {
		if err := switchboard.ValidateID(in.ID); err != nil {
			return err
		}
		o, err := s.owner(r.Context(), in.ID)
		if err != nil {
			return err
		}
		// An expired row's owner has stopped heartbeating: its id is free
		// for a new registration (a crashed process restarting with the
		// same --id takes it over after one TTL, not after the reap).
		if o.found && !o.stale {
			if err := checkSecret(in.ID, o.hash, given); err != nil {
				s.audit(r, slog.LevelWarn, "audit: credential refused", slog.String("credential", "instance secret"), slog.String("id", in.ID))
				return err
			}
		}
		if o.found && o.hash != "" && given != "" && secretMatches(o.hash, given) && secretTag(o.hash) == cred.tag {
			// Stored again as it is: a new salt would make an identical
			// re-registration a change for every watcher.
			kept = o.hash
		}
		if err := s.instanceQuota(!o.found, len(b)); err != nil {
			return err
		}
		// The credential owns one more live row unless this one is live
		// and its own already.
		if release, err = s.credentialInstanceQuota(cred, !o.found || o.stale || secretTag(o.hash) != cred.tag); err != nil {
			return err
		}
	} else {
		if err := s.instanceQuota(true, len(b)); err != nil {
			return err
		}
		if release, err = s.credentialInstanceQuota(cred, true); err != nil {
			return err
		}
	}
	defer release()
	if secret == "" {
		secret = schema.NewSecret()
	}
	md := make(map[string]string, len(in.Metadata)+1)
	for k, v := range in.Metadata {
		md[k] = v
	}
	// The row is the registering credential's from now on (the
	// administrator's: nobody's): its tag is in the secret's salt.
	md[secretKey] = cmp.Or(kept, hashSecret(secret, cred.tag))
	in.Metadata = md
	stored, err := s.cat.Register(r.Context(), in)
	if err != nil {
		return err
	}
	s.metrics.registrations.Inc()
	out := strip(stored)
	s.feed.await(r.Context(), out.ID, func(st *state) bool { return sameContent(st, &out) })
	writeJSON(w, http.StatusOK, RegisterResponse{Instance: out, Secret: secret})
	return nil
}

// mayChange checks that r may change instance id's row, as a deletion or
// a drain does: with the row's secret, or as the administrator; other
// reports the administrator acting on a row that is not its own (to be
// audited once done). A row that is gone is not found; a refusal is
// audited.
func (s *Server) mayChange(r *http.Request, id string) (other bool, err error) {
	o, err := s.owner(r.Context(), id)
	if err != nil {
		return false, err
	}
	if !o.found {
		return false, fmt.Errorf("instance %q: %w", id, switchboard.ErrNotFound)
	}
	if err := checkSecret(id, o.hash, r.Header.Get(SecretHeader)); err != nil {
		if roleOf(r) != roleAdmin {
			s.audit(r, slog.LevelWarn, "audit: credential refused", slog.String("credential", "instance secret"), slog.String("id", id))
			return false, err
		}
		return true, nil
	}
	return false, nil
}

func (s *Server) handleDeregister(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	other, err := s.mayChange(r, id)
	if err != nil {
		return err
	}
	if err := s.cat.Deregister(r.Context(), id); err != nil {
		return err
	}
	if other {
		s.audit(r, slog.LevelInfo, "audit: instance deleted by another party", slog.String("id", id))
	}
	s.feed.await(r.Context(), id, func(st *state) bool { return st == nil })
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleHeartbeat renews one instance; 404 when its row is gone (register
// it again).
func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	missing, refused, err := s.heartbeat(r.Context(), []HeartbeatItem{{ID: id, Secret: r.Header.Get(SecretHeader)}})
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		s.audit(r, slog.LevelWarn, "audit: credential refused", slog.String("credential", "instance secret"), slog.String("id", id))
		return refused[0].err
	}
	if len(missing) > 0 {
		return fmt.Errorf("instance %q has no row (reaped or deregistered): register it again: %w", id, switchboard.ErrNotFound)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) handleHeartbeats(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var req HeartbeatRequest
	if err := strictUnmarshal(b, &req); err != nil {
		return err
	}
	missing, refused, err := s.heartbeat(r.Context(), req.Instances)
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		// One line per request, not per id: a batch may refuse thousands.
		s.audit(r, slog.LevelWarn, "audit: credential refused", slog.String("credential", "instance secret"),
			slog.Int("ids", len(refused)), slog.String("id", refused[0].id))
	}
	resp := HeartbeatResponse{Missing: missing}
	if resp.Missing == nil {
		resp.Missing = []string{}
	}
	for _, rf := range refused {
		_, body := classify(rf.err)
		resp.Refused = append(resp.Refused, RefusedItem{ID: rf.id, Code: body.Code, Error: body.Error})
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// refusal is an id of a heartbeat whose secret check failed.
type refusal struct {
	id  string
	err error
}

// heartbeat checks every item's secret, then renews those that pass
// through the batcher: one id that is no longer the client's (another
// client re-registered it after it expired) must not let the client's
// other registrations expire. Invalid input renews nothing.
func (s *Server) heartbeat(ctx context.Context, items []HeartbeatItem) (missing []string, refused []refusal, err error) {
	// One request renews at most what one catalog call takes; the
	// batcher splits the union of several requests itself.
	if len(items) > switchboard.MaxHeartbeatIDs {
		return nil, nil, badRequest("instances", fmt.Sprintf("%d instances in one heartbeat; at most %d", len(items), switchboard.MaxHeartbeatIDs))
	}
	for i, it := range items {
		if err := switchboard.ValidateID(it.ID); err != nil {
			fe := err.(*switchboard.FieldError)
			return nil, nil, switchboard.NewFieldError(switchboard.ErrInvalid, fmt.Sprintf("instances[%d].id", i), fe.Value, fe.Reason)
		}
	}
	all := make([]string, len(items))
	for i, it := range items {
		all[i] = it.ID
	}
	// The ownership of every id at once: from the mirror, and for the ids
	// it lacks, a bounded number of catalog reads (owners), not one each.
	owners, err := s.owners(ctx, all)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		o := owners[it.ID]
		if !o.found {
			missing = append(missing, it.ID)
			continue
		}
		if err := checkSecret(it.ID, o.hash, it.Secret); err != nil {
			refused = append(refused, refusal{it.ID, err})
			continue
		}
		ids = append(ids, it.ID)
	}
	if len(ids) > 0 {
		m, err := s.beats.do(ctx, ids)
		if err != nil {
			return nil, nil, err
		}
		missing = append(missing, m...)
		s.metrics.heartbeats.Add(float64(len(ids) - len(m)))
	}
	return missing, refused, nil
}

func (s *Server) handleReap(w http.ResponseWriter, r *http.Request) error {
	query, err := params(r, "older_than", "reachable_for")
	if err != nil {
		return err
	}
	var older time.Duration
	if v := query.Get("older_than"); v != "" {
		d, err := switchboard.ParseDuration("older_than", v)
		if err != nil {
			return err
		}
		older = d
	}
	reachable := time.Duration(-1)
	if v := query.Get("reachable_for"); v != "" {
		if older > 0 {
			return &switchboard.FieldError{Field: "reachable_for", Value: v, Reason: "not with older_than (a reap by age has no grace)"}
		}
		d, err := switchboard.ParseDuration("reachable_for", v)
		if err != nil {
			return err
		}
		reachable = d
	}
	if older > 0 && roleOf(r) != roleAdmin && !s.open() {
		// A client may reap by age only what is reapable anyway: rows
		// stale for twice their TTL. Below twice the longest TTL it could
		// delete live rows.
		if live := 2 * s.feed.maxTTL(s.defaultTTL()); older < live {
			s.audit(r, slog.LevelWarn, "audit: reap refused", slog.Duration("older_than", older), slog.Duration("live_below", live))
			return s.errNeedsAdmin(fmt.Sprintf("reaping rows older than %s (under %s, twice the longest TTL, it would delete live registrations)", older, live))
		}
	}
	n, err := s.reap(r.Context(), older, reachable)
	if err != nil {
		return err
	}
	if older > 0 || n > 0 {
		s.audit(r, slog.LevelInfo, "audit: reap", slog.Duration("older_than", older), slog.Int("rows", n))
	}
	out := ReapResponse{Reaped: n}
	if s.opts.ReapInterval > 0 {
		out.ReapsEvery = s.opts.ReapInterval.String()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleNow(w http.ResponseWriter, r *http.Request) error {
	now, err := s.cat.Now(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, NowResponse{Now: now})
	return nil
}
