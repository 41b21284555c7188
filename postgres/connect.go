package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/suggest"
)

// DefaultConnectTimeout bounds each connection's setup (dial, TLS, the
// server's first answer) when the DSN sets no connect_timeout (nor the
// environment PGCONNECT_TIMEOUT): a server that accepts connections but
// never answers fails Open within seconds instead of hanging. A
// connect_timeout in the DSN replaces it (in whole seconds;
// connect_timeout=0 waits without bound, as libpq does).
const DefaultConnectTimeout = 5 * time.Second

// connectTimeout gives cfg the default connect timeout unless the DSN raw
// (or the environment) sets one, and returns the bound that applies (0:
// none).
func connectTimeout(raw string, cfg *pgxpool.Config) time.Duration {
	if _, ok := os.LookupEnv("PGCONNECT_TIMEOUT"); ok {
		return cfg.ConnConfig.ConnectTimeout
	}
	if u, err := url.Parse(connString(raw)); err == nil && u.Query().Has("connect_timeout") {
		return cfg.ConnConfig.ConnectTimeout
	}
	cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	return DefaultConnectTimeout
}

// connectFailure is an error of Open's first connection: its message says
// what happened in one line, and it wraps the sentinel that classifies it
// (when there is one) and the driver's error.
type connectFailure struct {
	msg  string
	kind error
	err  error
}

func (e *connectFailure) Error() string { return e.msg }

func (e *connectFailure) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// SQLSTATEs of a connection the server refused.
const (
	invalidCatalogName   = "3D000" // the database does not exist
	undefinedObject      = "42704" // unrecognized configuration parameter
	invalidPassword      = "28P01"
	invalidAuthorization = "28000" // no pg_hba.conf entry, role does not exist
)

// connectError explains why Open's first connection to cfg failed (err,
// from the driver; timeout is the connect timeout that applied, 0 for
// none): whether the server answered and what it said, or that it could
// not be reached, with what to do. ctx is Open's: when it ended, the
// failure is its.
func connectError(ctx context.Context, err error, cfg *pgxpool.Config, timeout time.Duration) error {
	cc := &cfg.ConnConfig.Config
	server := fmt.Sprintf("%s:%d", cc.Host, cc.Port)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return answered(pe, cc, server, err)
	}
	at := fmt.Sprintf("postgres: %v at %s", switchboard.ErrUnreachable, where(cfg))
	if ctx.Err() == nil && timeout > 0 && errors.Is(err, context.DeadlineExceeded) {
		what := "the server accepted the connection but did not answer"
		if dialFailed(err) {
			what = "no connection could be made"
		}
		return &connectFailure{kind: switchboard.ErrUnreachable, err: err, msg: fmt.Sprintf(
			"%s: %s within %s (is it PostgreSQL, and not stopped or overloaded? connect_timeout=SECONDS in the DSN waits longer)",
			at, what, timeout)}
	}
	return &connectFailure{kind: switchboard.ErrUnreachable, err: err, msg: at + ": " + attempts(err)}
}

// answered is the error of a connection the server refused: err's
// PostgreSQL error pe, told apart by its SQLSTATE.
func answered(pe *pgconn.PgError, cc *pgconn.Config, server string, err error) error {
	switch pe.Code {
	case invalidCatalogName:
		return &connectFailure{kind: switchboard.ErrNoCatalog, err: err, msg: fmt.Sprintf(
			"postgres: database %q does not exist on %s (the server answered): create it (createdb -h %s -p %d -U %s %s) or name an existing database in the DSN",
			cc.Database, server, cc.Host, cc.Port, cc.User, cc.Database)}
	case undefinedObject:
		if name, ok := unknownParameter(pe.Message); ok {
			msg := fmt.Sprintf("postgres: the server at %s does not know the DSN's parameter %q", server, name)
			if s := suggest.Closest(name, connParams, 2); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			msg += ": a parameter the driver does not know is sent to the server as a setting, and it refused this one"
			return &connectFailure{kind: switchboard.ErrInvalidDSN, err: err, msg: msg}
		}
	case invalidPassword, invalidAuthorization:
		return &connectFailure{err: err, msg: fmt.Sprintf(
			"postgres: the server at %s refused user %q: %s (SQLSTATE %s); check the DSN's user and password (or PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf",
			server, cc.User, pe.Message, pe.Code)}
	}
	var kind error
	switch pe.Code[:2] {
	case "08", "53", "57": // connection exceptions, insufficient resources, the server starting or shutting down: it may work later
		kind = switchboard.ErrUnreachable
	}
	return &connectFailure{kind: kind, err: err, msg: fmt.Sprintf(
		"postgres: the server at %s refused the connection to database %q: %s (SQLSTATE %s)", server, cc.Database, pe.Message, pe.Code)}
}

// unknownParameter is the parameter named by the server's
// `unrecognized configuration parameter "NAME"`.
func unknownParameter(msg string) (string, bool) {
	const prefix = `unrecognized configuration parameter "`
	rest, ok := strings.CutPrefix(msg, prefix)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, `"`)
	return name, ok && name != ""
}

// connParams are the DSN parameters the driver reads itself (libpq's and
// pgx's, the pool's included), for suggesting one when the server refused a
// parameter as an unknown setting.
var connParams = []string{
	"host", "port", "dbname", "user", "password", "passfile", "connect_timeout",
	"sslmode", "sslkey", "sslcert", "sslrootcert", "sslpassword", "sslsni", "sslnegotiation",
	"krbspn", "krbsrvname", "target_session_attrs", "service", "servicefile",
	"application_name", "search_path", "timezone", "options",
	"default_query_exec_mode", "statement_cache_capacity", "description_cache_capacity", "min_read_buffer_size",
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_lifetime_jitter", "pool_max_conn_idle_time", "pool_health_check_period",
}

// dialFailed reports whether every connection attempt in err failed
// before a connection was made (a dial error), rather than waiting for
// the server's answer.
func dialFailed(err error) bool {
	errs := attemptErrors(err)
	for _, e := range errs {
		var op *net.OpError
		if !errors.As(e, &op) || op.Op != "dial" {
			return false
		}
	}
	return len(errs) > 0
}

// attemptErrors are the errors of each attempt the driver made (one per
// address and TLS mode) in err.
func attemptErrors(err error) []error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		err = ce.Unwrap()
	}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		return m.Unwrap()
	}
	return []error{err}
}

// attempts is the distinct errors of the driver's attempts in err, in one
// line: with sslmode=prefer (the default) it tries with TLS and without,
// and a failure both hit would otherwise be told twice.
func attempts(err error) string {
	var out []string
	for _, e := range attemptErrors(err) {
		s := strings.Join(strings.Fields(e.Error()), " ")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}
