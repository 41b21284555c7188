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

func decodeLease(r *http.Request) (LeaseRequest, time.Duration, error) {
	var req LeaseRequest
	b, err := readBody(r)
	if err != nil {
		return req, 0, err
	}
	if err := strictUnmarshal(b, &req); err != nil {
		return req, 0, err
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil {
			return req, 0, badRequest("ttl", "ttl "+req.TTL+": want a duration like 15s")
		}
	}
	return req, ttl, nil
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
	l, err := s.leaser()
	if err != nil {
		return err
	}
	req, ttl, err := decodeLease(r)
	if err != nil {
		return err
	}
	le, err := l.Acquire(r.Context(), req.Name, req.Holder, ttl)
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, le)
}

func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request) error {
	l, err := s.leaser()
	if err != nil {
		return err
	}
	req, ttl, err := decodeLease(r)
	if err != nil {
		return err
	}
	le, err := l.Renew(r.Context(), switchboard.Lease{Name: req.Name, Holder: req.Holder, Token: req.Token, TTL: ttl})
	if err != nil {
		return err
	}
	return s.leaseReply(w, r, le)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request) error {
	l, err := s.leaser()
	if err != nil {
		return err
	}
	req, ttl, err := decodeLease(r)
	if err != nil {
		return err
	}
	if err := l.Release(r.Context(), switchboard.Lease{Name: req.Name, Holder: req.Holder, Token: req.Token, TTL: ttl}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
