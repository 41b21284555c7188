package httpapi

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
)

// role is what a request's credential lets it do.
type role int

const (
	// roleClient registers, renews and deregisters its own rows, holds
	// its own leases and reaps rows that are already reapable.
	roleClient role = iota + 1
	// roleAdmin may also reap live rows, delete others' rows and release
	// others' leases.
	roleAdmin
)

func (r role) String() string {
	if r == roleAdmin {
		return "admin"
	}
	return "client"
}

// caller is what authorize found of a request's credential: its role,
// and which client token it carried (its index in the server's client
// tokens; -1 for none, and for the admin token).
type caller struct {
	role  role
	token int
}

type callerKey struct{}

// callerOf is the caller authorize found for r (a client without a token
// when none was set).
func callerOf(r *http.Request) caller {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{role: roleClient, token: -1}
}

// roleOf is the role authorize found for r (client when none was set).
func roleOf(r *http.Request) role { return callerOf(r).role }

// open reports whether the server has no token at all: then it answers
// only IP and loopback Host names (and AllowedHosts), every caller is a
// client, and any may reap by age (only a program on an allowed host can
// reach it, and never a page of another origin); deleting another's row
// or releasing another's lease still needs an admin token.
func (s *Server) open() bool { return len(s.tokens) == 0 && s.opts.AdminToken == "" }

// authorize checks the bearer token and records the caller's role in the
// request's context.
func (s *Server) authorize(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.checkToken(r)
		if err != nil {
			s.audit(r, slog.LevelWarn, "audit: credential refused", slog.String("credential", "api token"), slog.String("error", err.Error()))
			return err
		}
		if err := jsonBody(r); err != nil {
			return err
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}
}

// checkToken checks r's bearer token, in constant time, against the
// configured ones: with none configured every caller is a client;
// with a client token configured a missing token is unauthorized;
// a token that is none of them is forbidden; with AdminToken alone, a
// request without a token is a client.
func (s *Server) checkToken(r *http.Request) (caller, error) {
	none := caller{role: roleClient, token: -1}
	if s.open() {
		return none, nil
	}
	// The scheme is case-insensitive (RFC 9110 §11.1): "bearer x" is the
	// token x, not a missing one.
	hdr := r.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(hdr, " ")
	tok = strings.TrimLeft(tok, " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		if len(s.tokens) == 0 && hdr == "" {
			return none, nil
		}
		return caller{}, unauthorized("missing API token: send Authorization: Bearer <token>")
	}
	// Every token compared every time, so the time taken does not say
	// which token was near, nor which matched.
	admin := s.opts.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.AdminToken)) == 1
	client := -1
	for i, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(t)) == 1 {
			client = i
		}
	}
	switch {
	case admin:
		return caller{role: roleAdmin, token: -1}, nil
	case client >= 0:
		return caller{role: roleClient, token: client}, nil
	}
	return caller{}, forbidden("wrong API token")
}

// authorized reports whether r may see what the token protects: it
// carries a token the server takes, or none is configured.
func (s *Server) authorized(r *http.Request) bool {
	if s.open() {
		return true
	}
	_, err := s.checkToken(r)
	return err == nil && r.Header.Get("Authorization") != ""
}

// errNeedsAdmin is the refusal of an operation only the administrator
// may do; what says what it was.
func (s *Server) errNeedsAdmin(what string) error {
	if s.opts.AdminToken == "" {
		return forbidden(what + " needs the admin token, and this server has none: set http.admin_token (or http.admin_token_file) on the server and send it as Authorization: Bearer <admin token>")
	}
	return forbidden(what + " needs the admin token: send it as Authorization: Bearer <admin token>")
}

// hostAllowed reports whether a server with no token answers a request
// for host (the Host header, with or without port): an IP address, which
// no DNS rebinding can produce, localhost and names under .localhost, and
// the configured AllowedHosts. A server with a token answers every Host:
// the token is what a rebound page lacks.
func (s *Server) hostAllowed(host string) bool {
	if !s.open() || host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, a := range s.opts.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), host) {
			return true
		}
	}
	return false
}

// guard refuses, before any handler runs, what no route may answer: a
// Host a tokenless server does not serve (403), and a cross-origin
// browser request that changes state (403, by Go's CrossOriginProtection:
// the Sec-Fetch-Site header, else Origin against Host).
func (s *Server) guard(r *http.Request) error {
	if !s.hostAllowed(r.Host) {
		return forbidden("Host " + r.Host + " is not served: a server without a token answers only IP addresses, localhost and http.allowed_hosts (set a token, or add the name to http.allowed_hosts)")
	}
	if err := s.cop.Check(r); err != nil {
		return forbidden("cross-origin request refused: " + err.Error())
	}
	return nil
}

// jsonBody refuses a request body that is not JSON (415): a page can send
// a form or text/plain to any origin without asking, never
// application/json. A body without a Content-Type is taken from a client
// that is no browser (a program: it sends neither Sec-Fetch-Site nor
// Origin), and refused from a browser, whose fetch of a typeless Blob is
// such a body too.
func jsonBody(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	ct := r.Header.Get("Content-Type")
	browser := r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Origin") != ""
	if ct == "" && (!browser || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody) {
		return nil // a program's body, or none: nothing to refuse
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		if ct == "" {
			ct = "none"
		}
		return &apiError{status: http.StatusUnsupportedMediaType, body: ErrorBody{Error: "request body must be JSON sent as Content-Type: application/json (got " + ct + ")", Code: CodeUnsupportedMedia}}
	}
	return nil
}

// audit logs one line of the audit trail: who (address, role) did or
// tried what (msg, a stable message), with attrs.
func (s *Server) audit(r *http.Request, level slog.Level, msg string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{
		slog.String("remote", r.RemoteAddr),
		slog.String("role", roleOf(r).String()),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
	}, attrs...)
	s.log.LogAttrs(r.Context(), level, msg, attrs...)
}

// clientKey identifies a client for per-client quotas: its role and its
// IP address.
func clientKey(r *http.Request) string {
	return roleOf(r).String() + "|" + remoteIP(r)
}
