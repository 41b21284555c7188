package config

// The switchboard.toml file: its keys laid over the defaults, and errors
// that name the key, its value and the type it wants.

import (
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/switchboard-io/switchboard"
)

// checkTypes reports a key of the file whose TOML value is not of the type
// it wants, and a section that is not a table, naming the key, the value
// and what it wants (the TOML decoder's own message names Go types).
func checkTypes(raw map[string]any) error {
	for _, section := range []string{"discovery", "http", "transport"} {
		v, ok := raw[section]
		if !ok {
			continue
		}
		tab, ok := v.(map[string]any)
		if !ok {
			return &switchboard.FieldError{Field: section, Reason: fmt.Sprintf("is %s; want a table: a [%s] line, then its keys", tomlValue(v), section)}
		}
		for _, s := range settings {
			sec, name, _ := strings.Cut(s.key, ".")
			v, ok := tab[name]
			if sec != section || !ok {
				continue
			}
			var want string
			switch _, isInt := v.(int64); s.want {
			case "duration":
				if _, ok := v.(string); !ok {
					want = `want a duration in quotes, such as "10s" or "250ms"`
				}
			case "string":
				if _, ok := v.(string); !ok {
					want = "want a string in quotes"
				}
			case "fraction":
				if _, isFloat := v.(float64); !isFloat && !isInt {
					want = "want a number such as 0.5"
				}
			case "count":
				if !isInt {
					want = "want a whole number, such as 10"
				}
			}
			if want != "" {
				return &switchboard.FieldError{Field: s.key, Reason: "is " + tomlValue(v) + "; " + want}
			}
		}
	}
	return nil
}

// tomlValue describes a decoded TOML value for an error: its type, and its
// value when it is short.
func tomlValue(v any) string {
	var kind string
	switch v.(type) {
	case string:
		return fmt.Sprintf("the string %q", truncate(v.(string)))
	case int64:
		kind = "the integer"
	case float64:
		kind = "the number"
	case bool:
		kind = "the boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		kind = "the date/time"
	}
	return kind + " " + truncate(fmt.Sprint(v))
}

func truncate(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

func (c *Config) overlayFile(path string, b []byte, from map[string]string) error {
	var raw map[string]any
	if _, err := toml.Decode(string(b), &raw); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkTypes(raw); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	var f fileConfig
	md, err := toml.Decode(string(b), &f)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	for _, k := range md.Keys() {
		if len(k) == 2 {
			from[k.String()] = fileOrigin
		}
	}
	for _, x := range []struct {
		v   *string
		dst *string
	}{{f.HTTP.Listen, &c.HTTP.Listen}, {f.HTTP.Token, &c.HTTP.Token}, {f.HTTP.TLSCert, &c.HTTP.TLSCert}, {f.HTTP.TLSKey, &c.HTTP.TLSKey},
		{f.Transport.TLSCert, &c.Transport.TLSCert}, {f.Transport.TLSKey, &c.Transport.TLSKey}, {f.Transport.TLSCA, &c.Transport.TLSCA},
		{f.Transport.NATSURL, &c.Transport.NATSURL}, {f.Transport.NATSTransport, &c.Transport.NATSTransport}} {
		if x.v != nil {
			*x.dst = *x.v
		}
	}
	d := f.Discovery
	if d.DSN != nil {
		c.Discovery.DSN = *d.DSN
	}
	if d.SelfPreservationThreshold != nil {
		c.Discovery.SelfPreservationThreshold = *d.SelfPreservationThreshold
	}
	if d.SelfPreservationMin != nil {
		c.Discovery.SelfPreservationMin = *d.SelfPreservationMin
	}
	for _, x := range []struct {
		v     *string
		dst   *time.Duration
		field string
	}{
		{d.HeartbeatInterval, &c.Discovery.HeartbeatInterval, "discovery.heartbeat_interval"},
		{d.PollInterval, &c.Discovery.PollInterval, "discovery.poll_interval"},
		{d.TTL, &c.Discovery.TTL, "discovery.ttl"},
		{d.MaxTTL, &c.Discovery.MaxTTL, "discovery.max_ttl"},
	} {
		if x.v == nil {
			continue
		}
		dur, err := switchboard.ParseDuration(x.field, *x.v)
		if err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
		*x.dst = dur
	}
	return nil
}
