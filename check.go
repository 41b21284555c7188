package switchboard

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-io/switchboard/internal/textcut"
)

// Check bounds.
const (
	MinCheckInterval = time.Second
	MaxCheckInterval = time.Hour
	// MaxCheckTarget and MaxCheckBody bound a check's target URL and
	// expected body substring (bytes).
	MaxCheckTarget = 2048
	MaxCheckBody   = 256
	// MaxCheckCount bounds Failures and Successes.
	MaxCheckCount = 100
)

// CheckKind is how a check probes its target: the scheme of Check.Target.
type CheckKind string

// Check kinds.
const (
	// CheckHTTP and CheckHTTPS: a GET; 2xx passes (and the body holds
	// Check.Body when set), 429 is a warning, anything else or a timeout
	// fails.
	CheckHTTP  CheckKind = "http"
	CheckHTTPS CheckKind = "https"
	// CheckTCP: a TCP connection is accepted.
	CheckTCP CheckKind = "tcp"
	// CheckGRPC: grpc.health.v1.Health/Check answers SERVING (for the
	// service named in the target's path, or the server as a whole).
	CheckGRPC CheckKind = "grpc"
)

// Check is an active health check of a registration: the catalog's check
// runners probe Target every Interval, so a service that cannot heartbeat
// (a database, a third-party server) is discovered too. A registration
// with a check and heartbeats is alive only while both hold.
type Check struct {
	// Target is what to probe: http://host[:port]/path,
	// https://host[:port]/path, tcp://host:port or
	// grpc://host:port[/service].
	Target string
	// Interval is the time between probes: 1s to 1h.
	Interval time.Duration
	// Timeout bounds one probe; under Interval. Zero:
	// min(Interval/2, 5s).
	Timeout time.Duration
	// Failures is how many consecutive failed probes make the instance
	// critical (zero: 3); Successes how many consecutive passing ones make
	// it passing again (zero: 1).
	Failures  int
	Successes int
	// Body, for http and https, is a substring the response body must
	// hold to pass.
	Body string
	// DeregisterAfter deletes the row (ReasonCheckCritical) once it has
	// been critical this long. Zero: 10 × Interval × Failures.
	DeregisterAfter time.Duration
}

// Kind returns the check's kind, from its target's scheme.
func (c *Check) Kind() CheckKind {
	k, _, _ := strings.Cut(c.Target, "://")
	return CheckKind(strings.ToLower(k))
}

// CheckTarget is a parsed Check.Target.
type CheckTarget struct {
	Kind CheckKind
	// Host is the host name or IP (IPv6 without brackets); Port the port,
	// the scheme's default (80, 443) when an http(s) target names none.
	Host string
	Port string
	// Path is an http(s) target's path and query ("/" when empty); for
	// grpc, the service name ("" for the whole server).
	Path string
}

// ParseCheckTarget parses and checks a check target.
func ParseCheckTarget(s string) (CheckTarget, error) {
	bad := func(reason string) (CheckTarget, error) {
		return CheckTarget{}, invalid(ErrInvalid, "check.target", s, reason)
	}
	if s == "" {
		return bad("must not be empty; want http://, https://, tcp:// or grpc:// and host:port")
	}
	if len(s) > MaxCheckTarget || !utf8.ValidString(s) {
		return bad(fmt.Sprintf("must be at most %d bytes of UTF-8", MaxCheckTarget))
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad("not a URL: " + strings.TrimPrefix(err.Error(), "parse "+fmt.Sprintf("%q", s)+": "))
	}
	t := CheckTarget{Kind: CheckKind(strings.ToLower(u.Scheme))}
	switch t.Kind {
	case CheckHTTP, CheckHTTPS, CheckTCP, CheckGRPC:
	default:
		return bad("unknown scheme; want http://, https://, tcp:// or grpc://")
	}
	if u.User != nil {
		return bad("must not carry credentials")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("missing host; want " + string(t.Kind) + "://host:port")
	}
	t.Host, t.Port = u.Hostname(), u.Port()
	if t.Host == "" {
		return bad("missing host")
	}
	if strings.HasSuffix(u.Host, ":") {
		return bad("empty port")
	}
	switch t.Kind {
	case CheckHTTP, CheckHTTPS:
		if t.Port == "" {
			t.Port = map[CheckKind]string{CheckHTTP: "80", CheckHTTPS: "443"}[t.Kind]
		}
		if u.Fragment != "" {
			return bad("must not have a fragment")
		}
		t.Path = u.RequestURI()
	case CheckTCP:
		if t.Port == "" {
			return bad("tcp checks need a port: tcp://host:port")
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
			return bad("tcp targets are host:port only")
		}
	case CheckGRPC:
		if t.Port == "" {
			return bad("grpc checks need a port: grpc://host:port[/service]")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return bad("grpc targets take no query or fragment")
		}
		t.Path = strings.TrimPrefix(u.Path, "/")
		if strings.Contains(t.Path, "/") {
			return bad("the grpc service name is one path segment: grpc://host:port/package.Service")
		}
	}
	if _, _, err := SplitHostPort(t.Address()); err != nil {
		return bad("port must be a number from 1 to 65535")
	}
	return t, nil
}

// Address is the target's host:port (IPv6 in brackets).
func (t CheckTarget) Address() string { return net.JoinHostPort(t.Host, t.Port) }

// normalize checks c and fills its defaults.
func (c Check) normalize() (Check, error) {
	if _, err := ParseCheckTarget(c.Target); err != nil {
		return Check{}, err
	}
	if c.Interval < MinCheckInterval || c.Interval > MaxCheckInterval {
		return Check{}, invalid(ErrInvalid, "check.interval", c.Interval.String(), fmt.Sprintf("must be from %s to %s", MinCheckInterval, MaxCheckInterval))
	}
	if c.Timeout < 0 {
		return Check{}, invalid(ErrInvalid, "check.timeout", c.Timeout.String(), "must not be negative")
	}
	if c.Timeout == 0 {
		c.Timeout = min(c.Interval/2, 5*time.Second)
	}
	if c.Timeout >= c.Interval {
		return Check{}, invalid(ErrInvalid, "check.timeout", c.Timeout.String(), fmt.Sprintf("must be under the interval (%s)", c.Interval))
	}
	for _, f := range []struct {
		name string
		n    *int
		def  int
	}{{"check.failures", &c.Failures, 3}, {"check.successes", &c.Successes, 1}} {
		if *f.n < 0 || *f.n > MaxCheckCount {
			return Check{}, invalid(ErrInvalid, f.name, fmt.Sprint(*f.n), fmt.Sprintf("must be from 1 to %d (0: %d)", MaxCheckCount, f.def))
		}
		if *f.n == 0 {
			*f.n = f.def
		}
	}
	if len(c.Body) > MaxCheckBody || !utf8.ValidString(c.Body) || strings.IndexByte(c.Body, 0) >= 0 {
		return Check{}, invalid(ErrInvalid, "check.body", textcut.Cut(c.Body, 40), fmt.Sprintf("must be at most %d bytes of UTF-8 without NUL", MaxCheckBody))
	}
	if c.Body != "" && c.Kind() != CheckHTTP && c.Kind() != CheckHTTPS {
		return Check{}, invalid(ErrInvalid, "check.body", c.Body, "applies to http and https checks only")
	}
	if c.DeregisterAfter < 0 {
		return Check{}, invalid(ErrInvalid, "check.deregister_after", c.DeregisterAfter.String(), "must not be negative")
	}
	if c.DeregisterAfter == 0 {
		c.DeregisterAfter = 10 * c.Interval * time.Duration(c.Failures)
	}
	if c.DeregisterAfter < c.Interval {
		return Check{}, invalid(ErrInvalid, "check.deregister_after", c.DeregisterAfter.String(), fmt.Sprintf("must be at least the interval (%s)", c.Interval))
	}
	return c, nil
}
