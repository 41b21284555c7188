package httpapi

import (
	"net/http"
	"time"

	"github.com/switchboard-io/switchboard"
)

func leaseJSON(l switchboard.Lease, now time.Time) LeaseJSON {
	return LeaseJSON{Name: l.Name, Holder: l.Holder, Token: l.Token, TTL: l.TTL.String(),
		ExpiresAt: l.ExpiresAt, Held: l.Holder != "" && l.ExpiresAt.After(now)}
}

func (s *Server) leaser() (switchboard.Leaser, error) {
	l, ok := s.cat.(switchboard.Leaser)
	if !ok {
		return nil, &apiError{http.StatusNotImplemented, ErrorBody{Error: "this server's catalog offers no leases", Code: "not_implemented"}}
	}
	return l, nil
}

func (s *Server) handleLeases(w http.ResponseWriter, r *http.Request) error {
	l, err := s.leaser()
	if err != nil {
		return err
	}
	list, err := l.Leases(r.Context())
	if err != nil {
		return err
	}
	now, err := s.cat.Now(r.Context())
	if err != nil {
		return err
	}
	out := make([]LeaseJSON, 0, len(list))
	for _, le := range list {
		out = append(out, leaseJSON(le, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// leaseRequest finds the catalog's leases and decodes the request's lease
// (name, holder, token, ttl): what acquire, renew and release all start with.
func (s *Server) leaseRequest(w http.ResponseWriter, r *http.Request) (switchboard.Leaser, switchboard.Lease, error) {
	l, err := s.leaser()
	if err != nil {
		return nil, switchboard.Lease{}, err
	}
	var req LeaseRequest
	b, err := s.readBody(w, r)
	if err != nil {
		return nil, switchboard.Lease{}, err
	}
	if err := strictUnmarshal(b, &req); err != nil {
		return nil, switchboard.Lease{}, err
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil {
			return nil, switchboard.Lease{}, badRequest("ttl", "ttl "+req.TTL+": want a duration like 15s")
		}
	}
	return l, switchboard.Lease{Name: req.Name, Holder: req.Holder, Token: req.Token, TTL: ttl}, nil
}

func (s *Server) leaseReply(w http.ResponseWriter, r *http.Request, le switchboard.Lease) error {
	now, err := s.cat.Now(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, leaseJSON(le, now))
	return nil
}

func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request) error {
	l, req, err := s.leaseRequest(w, r)
	if err != nil {
		return err
	}
	le, err := l.Acquire(r.Context(), req.Name, req.Holder, req.TTL)
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, le)
}

func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request) error {
	l, req, err := s.leaseRequest(w, r)
	if err != nil {
		return err
	}
	le, err := l.Renew(r.Context(), req)
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, le)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	l, req, err := s.leaseRequest(w, r)
	if err != nil {
		return err
	}
	if err := l.Release(r.Context(), req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
