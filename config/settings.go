package config

// The settings: every key of the file, with the field of Config it sets.
// This table is the one list of the keys: the environment variables that
// set them, what the file must hold for each, and where an error's value
// came from are all derived from it.

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
)

// setting is one key of the file.
type setting struct {
	key string // "section.name"
	// alias is a variable that sets the key too, read before the
	// SWITCHBOARD_ one, which wins when both are set.
	alias string
	// ptr returns the field of c the key sets: a *string, a
	// *time.Duration (a duration in quotes in the file), a *float64 (a
	// fraction), an *int (a count) or a *bool (true or false).
	ptr func(c *Config) any
}

var settings = []setting{
	{key: "discovery.dsn", ptr: func(c *Config) any { return &c.Discovery.DSN }},
	{key: "discovery.heartbeat_interval", ptr: func(c *Config) any { return &c.Discovery.HeartbeatInterval }},
	{key: "discovery.poll_interval", ptr: func(c *Config) any { return &c.Discovery.PollInterval }},
	{key: "discovery.ttl", ptr: func(c *Config) any { return &c.Discovery.TTL }},
	{key: "discovery.max_ttl", ptr: func(c *Config) any { return &c.Discovery.MaxTTL }},
	{key: "discovery.self_preservation_threshold", ptr: func(c *Config) any { return &c.Discovery.SelfPreservationThreshold }},
	{key: "discovery.self_preservation_min", ptr: func(c *Config) any { return &c.Discovery.SelfPreservationMin }},
	{key: "discovery.weight", ptr: func(c *Config) any { return &c.Discovery.Weight }},
	{key: "discovery.zone", ptr: func(c *Config) any { return &c.Discovery.Zone }},
	{key: "discovery.drain_wait", ptr: func(c *Config) any { return &c.Discovery.DrainWait }},
	{key: "http.listen", ptr: func(c *Config) any { return &c.HTTP.Listen }},
	{key: "http.token", ptr: func(c *Config) any { return &c.HTTP.Token }},
	{key: "http.token_file", ptr: func(c *Config) any { return &c.HTTP.TokenFile }},
	{key: "http.tokens", ptr: func(c *Config) any { return &c.HTTP.Tokens }},
	{key: "http.tokens_file", ptr: func(c *Config) any { return &c.HTTP.TokensFile }},
	{key: "http.admin_token", ptr: func(c *Config) any { return &c.HTTP.AdminToken }},
	{key: "http.admin_token_file", ptr: func(c *Config) any { return &c.HTTP.AdminTokenFile }},
	{key: "http.allowed_hosts", ptr: func(c *Config) any { return &c.HTTP.AllowedHosts }},
	{key: "http.max_lease_ttl", ptr: func(c *Config) any { return &c.HTTP.MaxLeaseTTL }},
	{key: "http.max_instances", ptr: func(c *Config) any { return &c.HTTP.MaxInstances }},
	{key: "http.max_instances_mib", ptr: func(c *Config) any { return &c.HTTP.MaxInstancesMiB }},
	{key: "http.max_leases", ptr: func(c *Config) any { return &c.HTTP.MaxLeases }},
	{key: "http.max_watchers", ptr: func(c *Config) any { return &c.HTTP.MaxWatchers }},
	{key: "http.max_instances_per_token", ptr: func(c *Config) any { return &c.HTTP.MaxInstancesPerToken }},
	{key: "http.max_leases_per_token", ptr: func(c *Config) any { return &c.HTTP.MaxLeasesPerToken }},
	{key: "http.max_watchers_per_token", ptr: func(c *Config) any { return &c.HTTP.MaxWatchersPerToken }},
	{key: "http.tls_cert", ptr: func(c *Config) any { return &c.HTTP.TLSCert }},
	{key: "http.tls_key", ptr: func(c *Config) any { return &c.HTTP.TLSKey }},
	{key: "http.request_timeout", ptr: func(c *Config) any { return &c.HTTP.RequestTimeout }},
	{key: "transport.tls_cert", ptr: func(c *Config) any { return &c.Transport.TLSCert }},
	{key: "transport.tls_key", ptr: func(c *Config) any { return &c.Transport.TLSKey }},
	{key: "transport.tls_ca", ptr: func(c *Config) any { return &c.Transport.TLSCA }},
	{key: "transport.nats_url", alias: "TINY_NATS_URL", ptr: func(c *Config) any { return &c.Transport.NATSURL }},
	{key: "transport.nats_transport", alias: "TINY_NATS_TRANSPORT", ptr: func(c *Config) any { return &c.Transport.NATSTransport }},
	{key: "dns.listen", ptr: func(c *Config) any { return &c.DNS.Listen }},
	{key: "dns.domain", ptr: func(c *Config) any { return &c.DNS.Domain }},
	{key: "dns.ttl", ptr: func(c *Config) any { return &c.DNS.TTL }},
	{key: "dns.max_records", ptr: func(c *Config) any { return &c.DNS.MaxRecords }},
	{key: "checks.run", ptr: func(c *Config) any { return &c.Checks.Run }},
	{key: "checks.allow", ptr: func(c *Config) any { return &c.Checks.Allow }},
	{key: "nats.creds", ptr: func(c *Config) any { return &c.NATS.Creds }},
	{key: "nats.nkey", ptr: func(c *Config) any { return &c.NATS.Nkey }},
	{key: "nats.user", ptr: func(c *Config) any { return &c.NATS.User }},
	{key: "nats.password", ptr: func(c *Config) any { return &c.NATS.Password }},
	{key: "nats.token", ptr: func(c *Config) any { return &c.NATS.Token }},
	{key: "nats.tls_ca", ptr: func(c *Config) any { return &c.NATS.TLSCA }},
	{key: "nats.tls_cert", ptr: func(c *Config) any { return &c.NATS.TLSCert }},
	{key: "nats.tls_key", ptr: func(c *Config) any { return &c.NATS.TLSKey }},
	{key: "nats.tls_first", ptr: func(c *Config) any { return &c.NATS.TLSFirst }},
	{key: "nats.stream_replicas", ptr: func(c *Config) any { return &c.NATS.StreamReplicas }},
}

// sections are the file's tables, in the order of settings.
var sections = func() []string {
	var out []string
	for _, s := range settings {
		if sec := s.section(); len(out) == 0 || out[len(out)-1] != sec {
			out = append(out, sec)
		}
	}
	return out
}()

func (s setting) section() string { sec, _, _ := strings.Cut(s.key, "."); return sec }
func (s setting) name() string    { _, name, _ := strings.Cut(s.key, "."); return name }

// env is the variable of the key: SWITCHBOARD_DISCOVERY_TTL for
// discovery.ttl.
func (s setting) env() string {
	return "SWITCHBOARD_" + strings.ToUpper(strings.ReplaceAll(s.key, ".", "_"))
}

// vars are the variables that set the key, the one that wins last.
func (s setting) vars() []string {
	if s.alias != "" {
		return []string{s.alias, s.env()}
	}
	return []string{s.env()}
}

// EnvVar is an environment variable Load reads, and the key it sets.
type EnvVar struct {
	Name string // SWITCHBOARD_DISCOVERY_TTL; TINY_NATS_URL, the SDK's name of a key
	Key  string // discovery.ttl, as in the file and NameSource's errors
}

// EnvVars returns every environment variable Load reads, with the key each
// sets, in the order Load reads them: the keys in the file's order, and of
// a key's two variables the one that loses (TINY_NATS_URL) before the one
// that wins (SWITCHBOARD_TRANSPORT_NATS_URL). A program that must not
// inherit the configuration from its environment (a test) clears these.
func EnvVars() []EnvVar {
	var out []EnvVar
	for _, s := range settings {
		for _, name := range s.vars() {
			out = append(out, EnvVar{Name: name, Key: s.key})
		}
	}
	return out
}

// value is the key's value in c (to tell whether an override changed it).
func (s setting) value(c *Config) any { return reflect.ValueOf(s.ptr(c)).Elem().Interface() }

// setEnv sets the key in c from the value v of the variable name.
func (s setting) setEnv(c *Config, name, v string) error {
	switch p := s.ptr(c).(type) {
	case *string:
		*p = v
	case *time.Duration:
		d, err := switchboard.ParseDuration(name, v)
		if err != nil {
			return err
		}
		*p = d
	case *float64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return &switchboard.FieldError{Field: name, Value: v, Reason: "want a fraction such as 0.5 (0 disables)"}
		}
		*p = f
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return &switchboard.FieldError{Field: name, Value: v, Reason: "want a whole number, such as 10"}
		}
		*p = n
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return &switchboard.FieldError{Field: name, Value: v, Reason: "want true or false"}
		}
		*p = b
	}
	return nil
}

// want says what the file must hold for the key when v, its value as the
// TOML decoder read it, is of the wrong TOML type; "" when v will do. (The
// decoder's own message would name Go types.)
func (s setting) want(v any) string {
	_, isString := v.(string)
	_, isInt := v.(int64)
	switch s.ptr(&Config{}).(type) {
	case *string:
		if !isString {
			return "want a string in quotes"
		}
	case *time.Duration:
		if !isString {
			return `want a duration in quotes, such as "10s" or "250ms"`
		}
	case *float64:
		if _, isFloat := v.(float64); !isFloat && !isInt {
			return "want a number such as 0.5"
		}
	case *int:
		if n, _ := v.(int64); !isInt || n < math.MinInt || n > math.MaxInt {
			return "want a whole number, such as 10"
		}
	case *bool:
		if _, isBool := v.(bool); !isBool {
			return "want true or false, without quotes"
		}
	}
	return ""
}

// setFile sets the key in c from v, its value in the file, of the type
// want accepts.
func (s setting) setFile(c *Config, v any) error {
	switch p := s.ptr(c).(type) {
	case *string:
		*p = v.(string)
	case *time.Duration:
		d, err := switchboard.ParseDuration(s.key, v.(string))
		if err != nil {
			return err
		}
		*p = d
	case *float64:
		if n, isInt := v.(int64); isInt {
			*p = float64(n)
		} else {
			*p = v.(float64)
		}
	case *int:
		*p = int(v.(int64))
	case *bool:
		*p = v.(bool)
	}
	return nil
}

// Where Load's record of the values' origins says a value came from, other
// than an environment variable's name.
const (
	fileOrigin     = "file"     // the file
	overrideOrigin = "override" // an override (a command-line flag) changed it
)

// KeyOf is the key of a validation field: Validate names the keys of
// [discovery] without their section ("ttl" is discovery.ttl), the others
// with it ("http.listen"). A field that is no key comes back with
// "discovery." before it, and matches no setting.
func KeyOf(field string) string {
	if strings.Contains(field, ".") {
		return field
	}
	return "discovery." + field
}

// sources is where each value of a loaded Config came from.
type sources struct {
	path string            // the file read, if any
	from map[string]string // key → variable, fileOrigin or overrideOrigin; absent: the default
}

// NameSource names, in a *switchboard.FieldError about one of c's settings
// (with Validate's field name: "ttl", "http.listen", whose key is KeyOf's),
// where the wrong value came from, as Load's validation errors do: the
// environment variable that set it, else the file's key (the error then
// says which file), else the key marked "(default)". A value an override (a
// command-line flag) changed keeps Validate's field name, for the caller to
// name its flag; so do the fields of a Config that Load did not return.
// Errors that are not a *FieldError of a known key are returned as they
// are.
func (c Config) NameSource(err error) error {
	fe, ok := err.(*switchboard.FieldError)
	if !ok || c.src == nil {
		return err
	}
	key := KeyOf(fe.Field)
	if !slices.ContainsFunc(settings, func(s setting) bool { return s.key == key }) {
		return err
	}
	out := *fe // keeps the sentinel it wraps
	switch origin := c.src.from[key]; origin {
	case overrideOrigin:
		return err // the caller names it
	case "":
		out.Field = key + " (default)"
	case fileOrigin:
		out.Field = key
		return fmt.Errorf("config %s: %w", c.src.path, &out)
	default:
		out.Field = origin
	}
	return &out
}
