package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/switchboard-io/switchboard"
)

// handleDrain drains (or, with draining false, undrains) an instance. Like
// a deletion it needs the instance's secret, or the admin token: the
// client token is shared by every registrant, and taking another's
// instance out of rotation is an operation on another's row.
func (s *Server) handleDrain(draining bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		d, ok := s.cat.(switchboard.Drainer)
		if !ok {
			return &apiError{status: http.StatusNotImplemented, body: ErrorBody{Error: "this server's catalog cannot drain instances", Code: "not_implemented"}}
		}
		other, err := s.mayChange(r, id)
		if err != nil {
			return err
		}
		in, err := d.Drain(r.Context(), id, draining)
		if err != nil {
			return err
		}
		if other {
			s.audit(r, slog.LevelInfo, "audit: instance drained by another party", slog.String("id", id), slog.Bool("draining", draining))
		}
		s.feed.await(r.Context(), id, func(st *state) bool { return st == nil || st.inst.Draining == draining })
		writeJSON(w, http.StatusOK, strip(in))
		return nil
	}
}
