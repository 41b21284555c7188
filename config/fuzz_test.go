package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// FuzzLoad: any file content either loads into a configuration that
// validates, or is an error; never a panic.
func FuzzLoad(f *testing.F) {
	f.Add("[discovery]\ndsn = \"sqlite://x.db\"\nttl = \"10s\"\nheartbeat_interval = \"3s\"\nmax_ttl = \"1h\"\n")
	f.Add("[discovery]\nttl = \"2h\"\n")
	f.Add("[http]\nlisten = \"127.0.0.1:7400\"\n[transport]\ntls_cert = \"c\"\ntls_key = \"k\"\n")
	f.Add("[discovery\n")
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(t.TempDir(), "switchboard.toml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(path, func(string) string { return "" })
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load returned a configuration that does not validate: %v", err)
		}
		if c.Discovery.TTL > c.Discovery.MaxTTL || 2*c.Discovery.HeartbeatInterval > c.Discovery.TTL+1 {
			t.Fatalf("limits not enforced: %+v", c.Discovery)
		}
	})
}

// FuzzLoadEnv: any value of any variable Load reads (durations, fractions,
// counts, the listen address, NATS URLs and transport, TLS files) either
// loads into a configuration that validates, or is a FieldError naming that
// variable (or a default that does not fit with it); never a panic.
func FuzzLoadEnv(f *testing.F) {
	vars := []string{
		"SWITCHBOARD_DISCOVERY_DSN", "SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL", "SWITCHBOARD_DISCOVERY_POLL_INTERVAL",
		"SWITCHBOARD_DISCOVERY_TTL", "SWITCHBOARD_DISCOVERY_MAX_TTL", "SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD",
		"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN", "SWITCHBOARD_HTTP_LISTEN", "SWITCHBOARD_HTTP_TOKEN",
		"SWITCHBOARD_HTTP_TLS_CERT", "SWITCHBOARD_HTTP_TLS_KEY", "SWITCHBOARD_TRANSPORT_TLS_CERT", "SWITCHBOARD_TRANSPORT_TLS_KEY",
		"SWITCHBOARD_TRANSPORT_TLS_CA", "TINY_NATS_URL", "TINY_NATS_TRANSPORT", "SWITCHBOARD_TRANSPORT_NATS_URL",
		"SWITCHBOARD_TRANSPORT_NATS_TRANSPORT", "SWITCHBOARD_HTTP_REQUEST_TIMEOUT",
	}
	for i, v := range []string{"sqlite://x.db", "1s", "1ns", "11s", "-1h", "NaN", "1e400", "[::1]:http", "", "a.pem", "b.pem", "", "",
		"nats://a:1, tls://b:2", "JetStream", "nats://", "a:1,", "core", "0s"} {
		f.Add(uint8(i), v)
	}
	empty := filepath.Join(f.TempDir(), "empty.toml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name := vars[int(which)%len(vars)]
		c, err := config.Load(empty, func(k string) string {
			if k == name {
				return value
			}
			return ""
		})
		if err != nil {
			// The variable's value is wrong, or a default does not fit
			// with it (the default heartbeat and a short ttl).
			var fe *switchboard.FieldError
			if !errors.As(err, &fe) || (fe.Field != name && !strings.HasSuffix(fe.Field, " (default)")) || !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("%s=%q: %v, want a FieldError naming %s", name, value, err, name)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s=%q: Load returned a configuration that does not validate: %v", name, value, err)
		}
	})
}
