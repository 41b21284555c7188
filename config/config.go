// Package config loads Switchboard's settings: defaults, then the
// switchboard.toml file, then SWITCHBOARD_<SECTION>_<KEY> environment
// variables; command-line flags (applied by the caller) win over all three.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/remote"
)

// DefaultFile is read when no file is named and it exists.
const DefaultFile = "switchboard.toml"

// Config is the whole file.
type Config struct {
	Discovery Discovery `toml:"discovery"`
	HTTP      HTTP      `toml:"http"`
	Transport Transport `toml:"transport"`
	DNS       DNS       `toml:"dns"`
	Checks    Checks    `toml:"checks"`
	NATS      NATS      `toml:"nats"`

	// src is where Load found each value (nil in a Config Load did not
	// return), for NameSource.
	src *sources
}

// Transport is the [transport] section: the module wire — TLS of the gRPC
// wire (servers such as `switchboard echo`, and the pool's connections; all
// empty means plaintext) and the NATS wire. Besides SWITCHBOARD_TRANSPORT_*,
// the TinySystems SDK's TINY_NATS_URL and TINY_NATS_TRANSPORT set the NATS
// keys (the SWITCHBOARD_ names win when both are set).
type Transport struct {
	// TLSCert and TLSKey are this side's PEM certificate and key (the
	// server's certificate; a client presents it for mutual TLS). Both or
	// neither.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// TLSCA is the PEM bundle of the authorities that sign the peers'
	// certificates: a server then requires client certificates (mutual
	// TLS), a client verifies servers with it.
	TLSCA string `toml:"tls_ca"`
	// NATSURL, when set, makes NATS the module wire (comma-separated
	// server URLs, e.g. nats://127.0.0.1:4222).
	NATSURL string `toml:"nats_url"`
	// NATSTransport is "core" (or empty: request/reply) or "jetstream"
	// (the durable wire).
	NATSTransport string `toml:"nats_transport"`
}

// HTTP is the [http] section: the `switchboard serve` server, and its
// clients (the CLI's commands with an http:// or https:// DSN), which send
// its token and bound each request by RequestTimeout.
type HTTP struct {
	// Listen is the server's address (default 127.0.0.1:7400).
	Listen string `toml:"listen"`
	// Token, when set, is required as "Authorization: Bearer <token>".
	Token string `toml:"token"`
	// TokenFile names a file holding the token (its first line), so the
	// token appears in no command line; Load reads it into Token. It
	// cannot be set with token (unless a flag sets the token).
	TokenFile string `toml:"token_file"`
	// Tokens are more client tokens for the server, comma-separated: each
	// is accepted wherever token is, and is a credential of its own for
	// the per-token quotas (max_instances_per_token, max_leases_per_token,
	// max_watchers_per_token), so each client or tenant given its own
	// token gets its own share.
	Tokens string `toml:"tokens"`
	// TokensFile names a file holding more client tokens, one a line
	// (blank lines and lines starting with # are skipped), so they appear
	// in no command line or environment; Load reads them into Tokens. It
	// cannot be set with tokens (unless a flag sets them).
	TokensFile string `toml:"tokens_file"`
	// AdminToken is the server's administrator token: it alone reaps
	// live rows, deletes another client's row and releases another's
	// lease.
	AdminToken string `toml:"admin_token"`
	// AdminTokenFile names a file holding the admin token (its first
	// line), as token_file does for the token.
	AdminTokenFile string `toml:"admin_token_file"`
	// AllowedHosts are host names, comma-separated, that a server without
	// a token answers besides IP addresses and localhost.
	AllowedHosts string `toml:"allowed_hosts"`
	// MaxLeaseTTL is the longest time a lease may be taken or renewed for
	// through the server (default 1h; 400 above).
	MaxLeaseTTL time.Duration `toml:"max_lease_ttl"`
	// MaxInstances is the server's quota of rows: a registration of a new
	// id past it is answered 429 with Retry-After (default 100000).
	MaxInstances int `toml:"max_instances"`
	// MaxInstancesMiB is the server's quota of the memory its instances
	// hold, in MiB: a registration that would take them past it is
	// answered 429 (default 512).
	MaxInstancesMiB int `toml:"max_instances_mib"`
	// MaxLeases is the server's quota of lease names (default 10000).
	MaxLeases int `toml:"max_leases"`
	// MaxWatchers is the server's quota of open watch streams (default
	// 1000; one client may hold 64 of them).
	MaxWatchers int `toml:"max_watchers"`
	// MaxInstancesPerToken is the quota of live instances one credential
	// owns: a registration that would make it own one more is answered
	// 429 with Retry-After. A credential is the client token a request
	// carries (token, or one of tokens), or its IP address when it
	// carries none; the admin token is exempt. 0 (the default) is no such
	// quota.
	MaxInstancesPerToken int `toml:"max_instances_per_token"`
	// MaxLeasesPerToken is the quota of leases one credential holds: a new
	// term past it is answered 429 (default 0: none).
	MaxLeasesPerToken int `toml:"max_leases_per_token"`
	// MaxWatchersPerToken is the quota of watch streams one credential
	// holds open on one server (default 0: none).
	MaxWatchersPerToken int `toml:"max_watchers_per_token"`
	// TLSCert and TLSKey are PEM files; both set means HTTPS.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// RequestTimeout bounds each request of a client to the server
	// (remote.Config.RequestTimeout): a server that does not answer within
	// it fails the request. Positive. `serve` and `nats`, which are no
	// clients, ignore it.
	RequestTimeout time.Duration `toml:"request_timeout"`
}

// DefaultRequestTimeout is the default [http] request_timeout: the remote
// catalog's own default.
const DefaultRequestTimeout = remote.DefaultRequestTimeout

// DefaultMaxLeaseTTL is the default [http] max_lease_ttl.
const DefaultMaxLeaseTTL = time.Hour

// DefaultListen is the default address of `switchboard serve`.
const DefaultListen = "127.0.0.1:7400"

// Discovery is the [discovery] section: which catalog, and how instances
// stay alive in it.
type Discovery struct {
	// DSN names the catalog: sqlite://PATH (sqlite:///abs/path for an
	// absolute one), sqlite::memory: (one process only), postgres://…,
	// http(s)://HOST:PORT of a `switchboard serve`, or kube://NAMESPACE.
	DSN string `toml:"dsn"`
	// HeartbeatInterval is how often a registered instance renews its
	// registration: at least 10ms and at most half of TTL. When none is
	// set anywhere, the CLI derives min(3s, TTL/3).
	HeartbeatInterval time.Duration `toml:"heartbeat_interval"`
	// PollInterval is the period of the full resync every watching
	// process runs as a safety net (changes are pushed); at least 1s,
	// since each one re-reads the whole catalog.
	PollInterval time.Duration `toml:"poll_interval"`
	// TTL is the liveness window of an instance registered without one of
	// its own: it is stale once it has not renewed for TTL, and reaped
	// at twice TTL.
	TTL time.Duration `toml:"ttl"`
	// MaxTTL is the largest TTL an instance may be registered with.
	MaxTTL time.Duration `toml:"max_ttl"`
	// SelfPreservationThreshold is the fraction of the instances that may
	// stop renewing at once before watchers hold their expirations
	// (default 0.5; 0 disables self-preservation). SelfPreservationMin is
	// the smallest number of instances it applies to (default 10).
	SelfPreservationThreshold float64 `toml:"self_preservation_threshold"`
	SelfPreservationMin       int     `toml:"self_preservation_min"`
	// Weight is the share of traffic of an instance registered here among
	// the instances of its name: 1 to 10000 (default 100).
	Weight int `toml:"weight"`
	// Zone is the locality of an instance registered here (a token such as
	// eu-west-1a; optional): callers may prefer their own zone.
	Zone string `toml:"zone"`
	// DrainWait is how long a registration being stopped stays registered
	// as draining before it deregisters, so that callers move away and
	// calls in flight finish (default 2s; 0 deregisters at once).
	DrainWait time.Duration `toml:"drain_wait"`
}

// MaxDrainWait bounds discovery.drain_wait.
const MaxDrainWait = 10 * time.Minute

// Default returns the defaults: switchboard's Default* values, DefaultListen
// and DefaultRequestTimeout, and self-preservation at half of at least 10
// instances.
func Default() Config {
	return Config{Discovery: Discovery{
		DSN:               switchboard.DefaultDSN,
		HeartbeatInterval: switchboard.DefaultHeartbeatInterval,
		PollInterval:      switchboard.DefaultPollInterval,
		TTL:               switchboard.DefaultTTL,
		MaxTTL:            switchboard.DefaultMaxTTL,

		SelfPreservationThreshold: 0.5,
		SelfPreservationMin:       10,
		Weight:                    switchboard.DefaultWeight,
		DrainWait:                 switchboard.DefaultDrainWait,
	}, HTTP: HTTP{Listen: DefaultListen, RequestTimeout: DefaultRequestTimeout, MaxLeaseTTL: DefaultMaxLeaseTTL,
		MaxInstances: 100000, MaxInstancesMiB: 512, MaxLeases: 10000, MaxWatchers: 1000},
		DNS: DNS{Domain: DefaultDNSDomain, MaxRecords: DefaultDNSMaxRecords}, Checks: Checks{Run: true}, NATS: NATS{StreamReplicas: DefaultStreamReplicas}}
}

// Load returns the defaults overlaid with the file at path (DefaultFile
// when path is empty and that file exists), the environment read through
// getenv (os.Getenv when nil), and last the overrides (command-line flags),
// in that order. Only the result is validated, so a flag can replace a value
// from the file or the environment that would not validate (a bad DSN, a
// heartbeat not shorter than the ttl); a value that does not even parse is
// an error where it stands. A validation error (a *switchboard.FieldError)
// names where the wrong value came from: the environment variable, the
// file's key (wrapped with the file's path), or the key with "(default)";
// a value an override changed keeps Validate's field name ("ttl"), for the
// caller to name its flag. A value of the wrong TOML type is an error naming
// its key, the value and the type wanted. The Config returned names its
// values' sources the same way in errors its caller finds later
// (NameSource).
func Load(path string, getenv func(string) string, overrides ...func(*Config)) (Config, error) {
	return LoadExcept(nil, path, getenv, overrides...)
}

// LoadExcept is Load for a program that does not use the keys named in
// unused (a server does not use "http.request_timeout", which bounds a
// client's requests): their values in the file and the environment are
// neither read nor checked, and no check whose error names them fails the
// load, so however wrong they are they cannot make it fail. The Config
// holds their defaults, or what an override set (unchecked). A check
// across two keys still runs with a skipped key's default and fails when
// its error names the other (skipping discovery.max_ttl, a ttl of 2h is
// still "at most max_ttl (1h)"): skip such keys together. A name in
// unused that is not a key is an error.
func LoadExcept(unused []string, path string, getenv func(string) string, overrides ...func(*Config)) (Config, error) {
	skip := map[string]bool{}
	for _, k := range unused {
		if !slices.ContainsFunc(settings, func(s setting) bool { return s.key == k }) {
			return Config{}, fmt.Errorf("config: %q is not a key; want one such as \"http.request_timeout\"", k)
		}
		skip[k] = true
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Default()
	explicit := path != ""
	if !explicit {
		path = DefaultFile
	}
	from := map[string]string{} // key → where its value came from (see sources)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := c.overlayFile(path, b, from, skip); err != nil {
			return Config{}, err
		}
	case explicit || !errors.Is(err, os.ErrNotExist):
		return Config{}, fmt.Errorf("config: %w", err)
	}
	for _, s := range settings {
		if skip[s.key] {
			continue
		}
		for _, name := range s.vars() {
			if v := getenv(name); v != "" {
				if err := s.setEnv(&c, name, v); err != nil {
					return Config{}, err
				}
				from[s.key] = name
			}
		}
	}
	before := c
	for _, o := range overrides {
		o(&c)
	}
	for _, s := range settings {
		if fmt.Sprint(s.value(&before)) != fmt.Sprint(s.value(&c)) { // not !=: NaN is a value too
			from[s.key] = overrideOrigin
		}
	}
	c.src = &sources{path: path, from: from}
	if err := c.validate(skip); err != nil {
		return Config{}, c.NameSource(err)
	}
	if err := c.readTokenFiles(); err != nil {
		return Config{}, c.NameSource(err)
	}
	return c, nil
}

// readTokenFiles sets Token and AdminToken from their files, when named.
// A token set both ways is an error, unless an override (a flag) set it:
// the flag wins.
func (c *Config) readTokenFiles() error {
	for _, t := range []struct {
		key, fileKey string
		tok          *string
		file         string
	}{
		{"http.token", "http.token_file", &c.HTTP.Token, c.HTTP.TokenFile},
		{"http.admin_token", "http.admin_token_file", &c.HTTP.AdminToken, c.HTTP.AdminTokenFile},
	} {
		if t.file == "" || (*t.tok != "" && c.src != nil && c.src.from[t.key] == overrideOrigin) {
			continue
		}
		if *t.tok != "" {
			return &switchboard.FieldError{Field: t.fileKey, Value: t.file, Reason: t.key + " is set too: set the token or its file, not both"}
		}
		tok, err := ReadTokenFile(t.file)
		if err != nil {
			return &switchboard.FieldError{Field: t.fileKey, Value: t.file, Reason: err.Error()}
		}
		*t.tok = tok
	}
	if f := c.HTTP.TokensFile; f != "" && !(c.HTTP.Tokens != "" && c.src != nil && c.src.from["http.tokens"] == overrideOrigin) {
		if c.HTTP.Tokens != "" {
			return &switchboard.FieldError{Field: "http.tokens_file", Value: f, Reason: "http.tokens is set too: set the tokens or their file, not both"}
		}
		toks, err := readTokensFile(f)
		if err != nil {
			return &switchboard.FieldError{Field: "http.tokens_file", Value: f, Reason: err.Error()}
		}
		c.HTTP.Tokens = strings.Join(toks, ",")
	}
	// Again with what the files held.
	return c.HTTP.validateTokens()
}

// readTokensFile returns the tokens in the file at path: one a line,
// without surrounding blanks; blank lines and lines starting with # are
// skipped. A file that cannot be read, holds no token, or a token with a
// comma, a blank or a control character inside, is an error saying which
// line.
func readTokensFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the tokens file: %w", err)
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		tok := strings.TrimSpace(line)
		if tok == "" || strings.HasPrefix(tok, "#") {
			continue
		}
		if !validToken(tok) {
			return nil, fmt.Errorf("the tokens file's line %d: a token has no commas, blanks or control characters", i+1)
		}
		out = append(out, tok)
	}
	if len(out) == 0 {
		return nil, errors.New("the tokens file holds no token")
	}
	return out, nil
}

func validToken(tok string) bool {
	return !strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == ',' || r == 0x7f })
}

// ClientTokens returns Tokens as a list, without blanks and empty entries.
func (h HTTP) ClientTokens() []string {
	var out []string
	for _, x := range strings.Split(h.Tokens, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// validateTokens checks that no client token is the admin token, and
// that every one is a token (the file's are checked as it is read).
func (h HTTP) validateTokens() error {
	for _, t := range h.ClientTokens() {
		if !validToken(t) {
			return &switchboard.FieldError{Field: "http.tokens", Value: "(redacted)", Reason: "a token has no blanks or control characters (tokens are separated by commas)"}
		}
		if h.AdminToken != "" && t == h.AdminToken {
			return &switchboard.FieldError{Field: "http.admin_token", Value: "(redacted)", Reason: "must differ from every token of http.tokens: clients hold those"}
		}
	}
	return nil
}

// ReadTokenFile returns the token in the file at path: its first line,
// without surrounding blanks. A file that cannot be read, or whose first
// line is empty, is an error saying so.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the token file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", errors.New("the token file's first line is empty")
	}
	if strings.ContainsFunc(tok, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", errors.New("the token file's first line has control characters")
	}
	return tok, nil
}

// Hosts returns AllowedHosts as a list, without blanks and empty entries.
func (h HTTP) Hosts() []string {
	var out []string
	for _, x := range strings.Split(h.AllowedHosts, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// Validate checks the DSN, the listen address, that the request timeout is
// positive, the TLS pairs, that poll_interval is at least MinPollInterval,
// that the TTL is within max_ttl, and that the heartbeat is at most half
// the TTL (a missed heartbeat must not expire an instance, and a renewal
// after 0.8 × TTL is logged as a revival in every process), and the [dns]
// keys.
func (c Config) Validate() error { return c.validate(nil) }

// validate is Validate without the errors about the keys in skip (the key,
// KeyOf its field, of a *switchboard.FieldError): each check runs in turn,
// so one about a skipped key hides none about the others.
func (c Config) validate(skip map[string]bool) error {
	d := c.Discovery
	positive := func(name string, v time.Duration) func() error {
		return func() error {
			if v <= 0 {
				return &switchboard.FieldError{Field: name, Value: v.String(), Reason: "must be positive"}
			}
			return nil
		}
	}
	checks := []func() error{
		func() error { _, err := switchboard.ParseDSN(d.DSN); return err },
		positive("heartbeat_interval", d.HeartbeatInterval),
		positive("poll_interval", d.PollInterval),
		positive("ttl", d.TTL),
		positive("max_ttl", d.MaxTTL),
		func() error {
			if d.PollInterval < MinPollInterval {
				return &switchboard.FieldError{Field: "poll_interval", Value: d.PollInterval.String(),
					Reason: fmt.Sprintf("must be at least %s: every period re-reads the whole catalog (changes are pushed; this is a safety net)", MinPollInterval)}
			}
			return nil
		},
		func() error { return validListen(c.HTTP.Listen) },
		func() error {
			if c.HTTP.RequestTimeout <= 0 {
				return &switchboard.FieldError{Field: "http.request_timeout", Value: c.HTTP.RequestTimeout.String(),
					Reason: "must be positive: how long each request to a switchboard server waits for its answer, such as 30s"}
			}
			return nil
		},
		func() error {
			return tlsPair("http", c.HTTP.TLSCert, c.HTTP.TLSKey, "both for HTTPS, neither for HTTP")
		},
		positive("http.max_lease_ttl", c.HTTP.MaxLeaseTTL),
		func() error {
			for _, q := range []struct {
				key string
				n   int
			}{{"http.max_instances", c.HTTP.MaxInstances}, {"http.max_instances_mib", c.HTTP.MaxInstancesMiB},
				{"http.max_leases", c.HTTP.MaxLeases}, {"http.max_watchers", c.HTTP.MaxWatchers}} {
				if q.n < 1 {
					return &switchboard.FieldError{Field: q.key, Value: strconv.Itoa(q.n), Reason: "must be at least 1"}
				}
			}
			for _, q := range []struct {
				key string
				n   int
			}{{"http.max_instances_per_token", c.HTTP.MaxInstancesPerToken}, {"http.max_leases_per_token", c.HTTP.MaxLeasesPerToken},
				{"http.max_watchers_per_token", c.HTTP.MaxWatchersPerToken}} {
				if q.n < 0 {
					return &switchboard.FieldError{Field: q.key, Value: strconv.Itoa(q.n), Reason: "must be 0 (no quota of one credential) or more"}
				}
			}
			return nil
		},
		c.HTTP.validateTokens,
		func() error {
			if c.HTTP.AdminToken != "" && c.HTTP.AdminToken == c.HTTP.Token {
				return &switchboard.FieldError{Field: "http.admin_token", Value: "(redacted)", Reason: "must differ from http.token: every client holds that one"}
			}
			return nil
		},
		func() error { return tlsPair("transport", c.Transport.TLSCert, c.Transport.TLSKey, "both, or neither") },
		c.Transport.validateMode,
		c.Transport.validateURLs,
		func() error {
			if t := d.SelfPreservationThreshold; !(t >= 0 && t < 1) {
				return &switchboard.FieldError{Field: "self_preservation_threshold", Value: strconv.FormatFloat(t, 'g', -1, 64), Reason: "must be a fraction in [0, 1) (0 disables self-preservation)"}
			}
			return nil
		},
		func() error {
			if d.SelfPreservationMin < 1 {
				return &switchboard.FieldError{Field: "self_preservation_min", Value: strconv.Itoa(d.SelfPreservationMin), Reason: "must be at least 1"}
			}
			return nil
		},
		func() error {
			if d.TTL > d.MaxTTL {
				return &switchboard.FieldError{Field: "ttl", Value: d.TTL.String(), Reason: fmt.Sprintf("must be at most max_ttl (%s)", d.MaxTTL)}
			}
			return nil
		},
		func() error { return switchboard.ValidateHeartbeat("heartbeat_interval", d.HeartbeatInterval, d.TTL) },
		func() error {
			if d.Weight < 1 || d.Weight > switchboard.MaxWeight {
				return &switchboard.FieldError{Field: "weight", Value: strconv.Itoa(d.Weight), Reason: fmt.Sprintf("must be from 1 to %d", switchboard.MaxWeight)}
			}
			return nil
		},
		func() error {
			if d.Zone == "" {
				return nil
			}
			_, err := switchboard.Normalize(switchboard.Instance{Name: "n", Type: "t", Address: "h:1", Zone: d.Zone})
			return err
		},
		func() error {
			if d.DrainWait < 0 || d.DrainWait > MaxDrainWait {
				return &switchboard.FieldError{Field: "drain_wait", Value: d.DrainWait.String(), Reason: fmt.Sprintf("must be from 0 (no drain) to %s", MaxDrainWait)}
			}
			return nil
		},
		c.DNS.validate,
		c.Checks.validate,
		c.NATS.validate,
	}
	for _, check := range checks {
		err := check()
		var fe *switchboard.FieldError
		if err != nil && !(errors.As(err, &fe) && skip[KeyOf(fe.Field)]) {
			return err
		}
	}
	return nil
}

// MinPollInterval is the shortest discovery.poll_interval: each period
// every watching process re-reads the whole catalog, so a shorter one is a
// busy loop of full reads.
const MinPollInterval = time.Second

// tlsPair checks that a section's tls_cert and tls_key are both set or
// neither, naming the one that is set (the error is about its value).
func tlsPair(section, cert, key, want string) error {
	if (cert == "") == (key == "") {
		return nil
	}
	field, value, missing := section+".tls_cert", cert, section+".tls_key"
	if cert == "" {
		field, value, missing = section+".tls_key", key, section+".tls_cert"
	}
	return &switchboard.FieldError{Field: field, Value: value, Reason: fmt.Sprintf("%s is not set; tls_cert and tls_key go together (%s)", missing, want)}
}

// validListen checks [http] listen: host:port with a port from 0 to 65535
// (":7400" for every interface). An empty value, which net.Listen would
// take for a random port on every interface, is refused.
func validListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = errors.New("bad port")
		}
	}
	if err != nil {
		return &switchboard.FieldError{Field: "http.listen", Value: addr, Reason: "want host:port, e.g. 127.0.0.1:7400 (:7400 listens on every interface)"}
	}
	return nil
}

// Options returns the catalog options of this configuration.
func (c Config) Options() switchboard.Options {
	o := switchboard.Options{DefaultTTL: c.Discovery.TTL, PollInterval: c.Discovery.PollInterval, MaxTTL: c.Discovery.MaxTTL,
		SelfPreservationThreshold: c.Discovery.SelfPreservationThreshold, SelfPreservationMin: c.Discovery.SelfPreservationMin}
	if o.SelfPreservationThreshold == 0 {
		o.SelfPreservationThreshold = -1 // 0 in the file disables; in Options it means the default
	}
	return o
}

// Validate checks that nats_transport is "", "core" or "jetstream" and that
// every URL of nats_url is nats://, tls://, ws:// or wss://, or host:port.
func (t Transport) Validate() error {
	if err := t.validateMode(); err != nil {
		return err
	}
	return t.validateURLs()
}

// validateMode checks nats_transport.
func (t Transport) validateMode() error {
	switch strings.ToLower(t.NATSTransport) {
	case "", "core", "jetstream":
		return nil
	}
	return &switchboard.FieldError{Field: "transport.nats_transport", Value: t.NATSTransport, Reason: `want "core" (or empty) or "jetstream"`}
}

// validateURLs checks every URL of nats_url.
func (t Transport) validateURLs() error {
	if t.NATSURL == "" {
		return nil
	}
	for u := range strings.SplitSeq(t.NATSURL, ",") {
		u = strings.TrimSpace(u)
		scheme, rest, ok := strings.Cut(u, "://")
		switch {
		case !ok && strings.Contains(u, ":") && !strings.ContainsAny(u, " /"):
		case ok && rest != "" && (scheme == "nats" || scheme == "tls" || scheme == "ws" || scheme == "wss"):
		default:
			// The URL may hold a password: never echo it.
			return &switchboard.FieldError{Field: "transport.nats_url", Value: "(hidden)", Reason: "want nats://host:port (or tls://, ws://, wss://), comma-separated for several servers"}
		}
	}
	return nil
}

// NATSJetStream reports whether the durable JetStream wire is selected.
func (t Transport) NATSJetStream() bool { return strings.EqualFold(t.NATSTransport, "jetstream") }
