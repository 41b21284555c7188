package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/switchboard-io/switchboard"
)

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) error {
	in := Info{Version: s.opts.Version}
	if d, err := switchboard.ParseDSN(s.opts.DSN); err == nil {
		in.Backend = d.Scheme
	}
	in.DSN = switchboard.RedactDSN(s.opts.DSN)
	ready, healthy, lastErr := s.feed.health()
	in.Healthy = ready && healthy
	in.Error = lastErr
	if !ready && lastErr == "" {
		in.Error = "the server's mirror has not read the catalog yet"
	}
	in.Instances.Active, in.Instances.Stale = s.feed.counts()
	in.Subscribers = int(s.metrics.subscriberCount())
	// Zero is a catalog that cannot tell (a remote one whose server does
	// not say): the field is then absent, as for a catalog without it.
	if d, ok := s.cat.(switchboard.TTLDefaulter); ok {
		if ttl := d.DefaultTTL(); ttl > 0 {
			in.DefaultTTL = ttl.String()
		}
	}
	if ws, ok := s.cat.(switchboard.WatchStatser); ok {
		st := ws.WatchStats()
		in.SelfPreservation = &SelfPreservation{Active: st.Preserving, HeldExpirations: st.HeldExpirations, Events: st.SelfPreservationEvents}
		if !st.Healthy {
			in.Healthy = false
			if st.LastError != nil {
				in.Error = st.LastError.Error()
			}
		}
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

// defaultTTL is the TTL the catalog gives a row registered without one:
// its own when it says, else the library's default.
func (s *Server) defaultTTL() time.Duration {
	if d, ok := s.cat.(switchboard.TTLDefaulter); ok {
		if ttl := d.DefaultTTL(); ttl > 0 {
			return ttl
		}
	}
	return switchboard.DefaultTTL
}

// healthProbeID is the id /healthz reads to see that the catalog's rows
// can be read, not only its clock: a PostgreSQL database whose catalog
// tables were dropped (restarted or restored empty) still tells the time.
// No row need have the id: not found is a healthy answer, and so is a row.
const healthProbeID = "switchboard-healthz-probe"

// handleHealthz answers 503 when the catalog does not answer a read of its
// clock and of a row (healthProbeID) within 2 s, and 200 otherwise: "ok",
// or "degraded" with the code no_catalog when the catalog answers that it
// is missing (a SQLite file nobody has registered in yet, PostgreSQL
// tables dropped). That is not a 503 on purpose: taking this server out of
// a load balancer's rotation (a readiness probe) would keep away the
// registrations and heartbeats that create the catalog again. It needs no
// token, but when a Token is configured only a request that carries it
// hears the catalog's error (it can name hosts, parts of the DSN, SQL),
// with the code any endpoint gives it (busy, else unavailable); any other
// gets the status (and no_catalog) alone.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	msg := "catalog unavailable: "
	_, err := s.cat.Now(ctx)
	if err == nil {
		msg = "catalog unreadable: "
		if _, err = s.cat.Get(ctx, healthProbeID); errors.Is(err, switchboard.ErrNotFound) {
			err = nil
		}
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case errors.Is(err, switchboard.ErrNoCatalog):
		body := map[string]string{"status": "degraded", "code": CodeNoCatalog}
		if s.authorized(r) {
			body["error"] = "catalog missing: " + err.Error()
		}
		writeJSON(w, http.StatusOK, body)
	case !s.authorized(r):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	default:
		return catalogDown(msg+err.Error(), err)
	}
	return nil
}
