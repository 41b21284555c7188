package switchboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// DSN is a parsed catalog address.
type DSN struct {
	// Scheme selects the backend: "sqlite", "postgres", "kube", "http",
	// "https" (a switchboard serve server). It is always lower case: a
	// scheme is case-insensitive (RFC 3986 §3.1), so "SQLite://x.db" is
	// a "sqlite" DSN.
	Scheme string
	// Path is the SQLite file (relative or absolute) or the Kubernetes
	// namespace; empty for PostgreSQL.
	Path string
	// Memory is true for "sqlite::memory:" (one process only).
	Memory bool
	// Raw is the DSN as given, its scheme's case included (a PostgreSQL
	// connection URL is passed on unchanged but for its scheme, which the
	// backend lower-cases for the driver).
	Raw string
}

// ParseDSN parses "sqlite://PATH", "sqlite:///abs/path", "sqlite::memory:",
// "postgres://…" / "postgresql://…", "kube://NAMESPACE" and
// "http://HOST:PORT" / "https://HOST:PORT" (a switchboard serve server,
// optionally under a path prefix). The scheme may be written in any case
// ("SQLITE:///x.db", "Postgres://…"), as RFC 3986 allows; DSN.Scheme is
// lower case and DSN.Raw keeps the DSN as written.
func ParseDSN(s string) (DSN, error) {
	const field = "dsn"
	// Errors show the DSN with its passwords redacted.
	shown := RedactDSN(s)
	// ls is s with its scheme in lower case: what the cases below match.
	// Only the scheme differs, so what follows it is read from ls as
	// from s.
	ls := lowerScheme(s)
	switch {
	case s == "":
		return DSN{}, invalid(ErrInvalidDSN, field, shown, "must not be empty; want sqlite://PATH, sqlite::memory: or postgres://…")
	case strings.TrimSpace(s) != s:
		// A stray newline from a secret file or a quoted environment
		// variable would otherwise become part of a file name.
		return DSN{}, invalid(ErrInvalidDSN, field, shown, "begins or ends with whitespace (a stray space or newline?)")
	case ls == "sqlite::memory:":
		return DSN{Scheme: "sqlite", Memory: true, Raw: s}, nil
	case strings.HasPrefix(ls, "sqlite://"):
		p := strings.TrimPrefix(ls, "sqlite://")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "sqlite DSN takes no query parameters")
		}
		if p == "" || strings.HasSuffix(p, "/") {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "sqlite DSN needs a file path, e.g. sqlite://.data/switchboard.db")
		}
		if strings.ContainsRune(p, 0) {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "path contains a NUL byte")
		}
		if strings.IndexFunc(p, unicode.IsControl) >= 0 {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "path contains a control character (a line break or tab?)")
		}
		if p == ":memory:" {
			return DSN{Scheme: "sqlite", Memory: true, Raw: s}, nil
		}
		return DSN{Scheme: "sqlite", Path: p, Raw: s}, nil
	case strings.HasPrefix(ls, "postgres://"), strings.HasPrefix(ls, "postgresql://"):
		u, err := url.Parse(s) // url.Parse lower-cases the scheme itself
		if err != nil {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, urlReason(err, s))
		}
		// u.Host is ":5432" for "postgres://:5432/db": a port but no host.
		if u.Hostname() == "" {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "postgres DSN needs a host, e.g. postgres://user@127.0.0.1:5432/db")
		}
		if !validPort(u.Port()) {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "port must be a number from 1 to 65535")
		}
		return DSN{Scheme: "postgres", Raw: s}, nil
	case strings.HasPrefix(ls, "http://"), strings.HasPrefix(ls, "https://"):
		scheme, rest, _ := strings.Cut(ls, "://")
		if authority, path, slash := strings.Cut(rest, "/"); strings.Contains(authority, ",") {
			// Several servers of one catalog (the client fails over among
			// them): each is checked as a DSN of its own, and a bad one
			// is named.
			for i, h := range strings.Split(authority, ",") {
				if h == "" {
					return DSN{}, invalid(ErrInvalidDSN, field, shown, fmt.Sprintf("server %d of the list is empty (a stray comma?)", i+1))
				}
				one := scheme + "://" + h
				if slash {
					one += "/" + path
				}
				if _, err := ParseDSN(one); err != nil {
					reason := err.Error()
					if fe := (*FieldError)(nil); errors.As(err, &fe) {
						reason = fe.Reason
					}
					return DSN{}, invalid(ErrInvalidDSN, field, shown, fmt.Sprintf("server %q of the list: %s", h, reason))
				}
			}
			return DSN{Scheme: scheme, Raw: s}, nil
		}
		u, err := url.Parse(s) // url.Parse lower-cases the scheme itself
		if err != nil {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, urlReason(err, s))
		}
		if u.Hostname() == "" {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "server DSN needs a host, e.g. http://127.0.0.1:7400")
		}
		if !validPort(u.Port()) {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "port must be a number from 1 to 65535")
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "server DSN takes no user, query or fragment (the API token comes from SWITCHBOARD_HTTP_TOKEN)")
		}
		return DSN{Scheme: u.Scheme, Raw: s}, nil
	case strings.HasPrefix(ls, "kube://"):
		ns := strings.TrimPrefix(ls, "kube://")
		if ns != "" && !isLabel(ns) {
			return DSN{}, invalid(ErrInvalidDSN, field, shown, "namespace must be an RFC 1123 label")
		}
		return DSN{Scheme: "kube", Path: ns, Raw: s}, nil
	}
	scheme, _, ok := strings.Cut(s, "://")
	if ok {
		return DSN{}, invalid(ErrInvalidDSN, field, shown, fmt.Sprintf("unknown scheme %q; want sqlite, postgres, kube, http or https", scheme))
	}
	return DSN{}, invalid(ErrInvalidDSN, field, shown, "want sqlite://PATH, sqlite::memory: or postgres://…")
}

// lowerScheme returns dsn with its URL scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.', up to the first ':') in lower case,
// and anything else unchanged; a string without a scheme is returned as
// it is.
func lowerScheme(dsn string) string {
	i := strings.IndexByte(dsn, ':')
	if i <= 0 || !isAlpha(dsn[0]) {
		return dsn
	}
	for j := 1; j < i; j++ {
		if c := dsn[j]; !isAlpha(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return dsn
		}
	}
	return strings.ToLower(dsn[:i]) + dsn[i:]
}

func isAlpha(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

// validPort reports whether the port of a URL (digits only, as url.Parse
// leaves it) is absent or 1–65535: port 0 would dial nothing ("connection
// refused") and one above 65535 fail only when first dialled.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// urlReason says why a URL-shaped DSN did not parse, without the password:
// the parser's message quotes the URL, and its detail may quote a piece of
// a password that is not percent-encoded.
func urlReason(err error, dsn string) string {
	if len(dsnSecrets(dsn)) > 0 {
		return "not a valid URL (a special character in the password must be percent-encoded)"
	}
	return "not a valid URL: " + err.Error()
}

// Options are the settings every backend takes from configuration.
type Options struct {
	// DefaultTTL is used for instances registered without a TTL
	// (zero: DefaultTTL).
	DefaultTTL time.Duration
	// PollInterval is the safety-net resync period of watches
	// (zero: DefaultPollInterval).
	PollInterval time.Duration
	// MaxTTL is the largest TTL an instance may be registered with
	// (zero: DefaultMaxTTL).
	MaxTTL time.Duration
	// SelfPreservationThreshold is the fraction of the instances that may
	// stop renewing at once before watches hold their expirations (zero:
	// 0.5; negative: self-preservation off). SelfPreservationMin is the
	// smallest number of instances it applies to (zero: 10).
	SelfPreservationThreshold float64
	SelfPreservationMin       int
	// MustExist opens only a catalog that exists already, for commands that
	// read it or change rows that must be there (ls, leases, deregister,
	// reap): the backend creates nothing (no file, directory or schema) and
	// a missing catalog is ErrNoCatalog. A schema older than the program's
	// is still migrated; a current one is only read.
	MustExist bool
	// Logger receives the backend's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Defaults of the configuration (docs/configuration.md).
const (
	DefaultDSN               = "sqlite://.data/switchboard.db"
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultTTL               = 10 * time.Second
	DefaultPollInterval      = 30 * time.Second
	// DefaultMaxTTL bounds instance TTLs: a crashed instance with a
	// day-long TTL would be served as alive for a day.
	DefaultMaxTTL = time.Hour
)

// WithDefaults fills zero fields with the defaults.
func (o Options) WithDefaults() Options {
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// OpenFunc opens a catalog for a parsed DSN.
type OpenFunc func(ctx context.Context, dsn DSN, opts Options) (Catalog, error)

var (
	backendsMu sync.RWMutex
	backends   = map[string]OpenFunc{}
)

// RegisterBackend makes a backend available to Open under scheme. Backend
// packages call it from init, so a program links only the backends it
// imports (the Kubernetes client stays out of a SQLite-only build).
func RegisterBackend(scheme string, open OpenFunc) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[scheme] = open
}

// Open parses dsn and opens the catalog of its backend.
func Open(ctx context.Context, dsn string, opts Options) (Catalog, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	backendsMu.RLock()
	open, ok := backends[d.Scheme]
	names := make([]string, 0, len(backends))
	for k := range backends {
		names = append(names, k)
	}
	backendsMu.RUnlock()
	if !ok {
		sort.Strings(names)
		linked := strings.Join(names, ", ")
		if linked == "" {
			linked = "none"
		}
		// The package that registers each scheme: a blank import links it.
		reason := "backend " + d.Scheme + " is not linked into this program"
		if pkg, ok := map[string]string{"sqlite": "sqlite", "postgres": "postgres", "kube": "kube", "http": "remote", "https": "remote"}[d.Scheme]; ok {
			reason += `: add import _ "github.com/switchboard-io/switchboard/` + pkg + `"`
		}
		return nil, &FieldError{Field: "dsn", Value: RedactDSN(dsn), Reason: reason + " (linked: " + linked + ")", kind: ErrUnknownBackend}
	}
	// Every registration without a TTL of its own gets the default: one
	// above the maximum would be refused, or stored past it.
	if o := opts.WithDefaults(); o.DefaultTTL > o.MaxTTL {
		return nil, invalid(ErrInvalid, "DefaultTTL", o.DefaultTTL.String(), fmt.Sprintf("must be at most MaxTTL (%s)", o.MaxTTL))
	}
	return open(ctx, d, opts)
}

// isLabel reports whether s is an RFC 1123 label, as a Kubernetes namespace
// must be: 1–63 characters of [a-z0-9-], starting and ending with [a-z0-9].
// (A namespace is not a module name: it may be longer than MaxNameLen.)
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-') {
			return false
		}
	}
	return true
}

// RedactDSN returns dsn with every password in it replaced by "xxxxx": the
// password of a URL's user information and the values of password= and
// sslpassword= query parameters. It works on the text as given, parsable
// or not, so a DSN that failed to parse can still be shown in an error.
func RedactDSN(dsn string) string {
	for _, pw := range dsnSecrets(dsn) {
		dsn = strings.ReplaceAll(dsn, pw, redacted)
	}
	return dsn
}

// RedactError returns err with every password of dsn (as written and
// percent-decoded) replaced by "xxxxx" in its message; errors.Is and
// errors.As still see the original chain. It returns err itself when the
// message holds no password.
func RedactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, pw := range dsnSecrets(dsn) {
		clean = strings.ReplaceAll(clean, pw, redacted)
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

const redacted = "xxxxx"

// passwordParam matches a password parameter of a URL query or a keyword/
// value DSN; its group is the value: quoted (up to the closing quote not
// escaped by a backslash, or the end), or up to a space or '&' (not '#': a
// password written with a '#' in it would show its tail).
var passwordParam = regexp.MustCompile(`(?i)(?:^|[\s?&])(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s&]*)`)

// quoteUnescaper undoes libpq's escapes in a quoted value.
var quoteUnescaper = strings.NewReplacer(`\\`, `\`, `\'`, `'`)

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// dsnSecrets returns the passwords written in dsn, each as written and, when
// different, percent-decoded; longest first, so a replacement never leaves
// part of a longer one behind.
func dsnSecrets(dsn string) []string {
	var out []string
	add := func(s string) {
		if s == "" || s == redacted {
			return
		}
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s && d != "" {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s && d != "" {
			out = append(out, d)
		}
	}
	rest := dsn
	if _, after, ok := strings.Cut(dsn, "://"); ok {
		rest = after
		// The authority ends at the first '/', '?' or '#'; the user
		// information at its last '@' (a password may contain '@' only
		// percent-encoded, but be generous with malformed input).
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
			}
		} else if pw, ok := cutPassword(rest, end); ok {
			add(pw)
		}
	}
	// password= and sslpassword= in a URL's query or a keyword/value
	// string, wherever they stand (first included), with spaces around '='
	// and quoted values (libpq's 'it\'s a secret') as libpq reads them.
	for _, m := range passwordParam.FindAllStringSubmatch(dsn, -1) {
		v := m[1]
		if q, ok := strings.CutPrefix(v, "'"); ok {
			q = strings.TrimSuffix(q, "'")
			add(q)
			add(quoteUnescaper.Replace(q))
			continue
		}
		add(v)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// cutPassword finds the password of user information that a '/', '?' or
// '#' in the password, not percent-encoded, cut short: rest[:end] (the
// authority as a URL parser reads it) has no '@', but is "user:…" where
// "…" is no port (nor a port and more hosts), and an '@' follows later.
// The password is taken to run to the last '@' of rest, which may hide
// more than the password, never less.
func cutPassword(rest string, end int) (string, bool) {
	user, after, ok := strings.Cut(rest[:end], ":")
	port, _, _ := strings.Cut(after, ",") // "h1:5432,h2:5433": several hosts
	if !ok || strings.HasPrefix(user, "[") || allDigits(port) {
		return "", false
	}
	colon := len(user)
	at := strings.LastIndexByte(rest, '@')
	if at <= colon {
		return "", false
	}
	return rest[colon+1 : at], true
}
