package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
// variable (or a default that does not fit with it); never a panic. With
// its key unused (LoadExcept), it always loads, into the defaults.
func FuzzLoadEnv(f *testing.F) {
	vars := config.EnvVars()
	for name, values := range map[string][]string{
		"SWITCHBOARD_DISCOVERY_DSN":                         {"sqlite://x.db"},
		"SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL":          {"1s"},
		"SWITCHBOARD_DISCOVERY_POLL_INTERVAL":               {"1ns"},
		"SWITCHBOARD_DISCOVERY_TTL":                         {"11s"},
		"SWITCHBOARD_DISCOVERY_MAX_TTL":                     {"-1h"},
		"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD": {"NaN"},
		"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN":       {"1e400"},
		"SWITCHBOARD_HTTP_LISTEN":                           {"[::1]:http"},
		"SWITCHBOARD_HTTP_TOKEN":                            {"s3cret"},
		"SWITCHBOARD_HTTP_TLS_CERT":                         {"a.pem"},
		"SWITCHBOARD_HTTP_TLS_KEY":                          {"b.pem"},
		"SWITCHBOARD_HTTP_REQUEST_TIMEOUT":                  {"0s"},
		"SWITCHBOARD_TRANSPORT_TLS_CA":                      {"ca.pem"},
		"TINY_NATS_URL":                                     {"nats://a:1, tls://b:2", "nats://"},
		"SWITCHBOARD_TRANSPORT_NATS_URL":                    {"a:1,"},
		"TINY_NATS_TRANSPORT":                               {"JetStream"},
		"SWITCHBOARD_TRANSPORT_NATS_TRANSPORT":              {"core"},
	} {
		i := slices.IndexFunc(vars, func(v config.EnvVar) bool { return v.Name == name })
		if i < 0 {
			f.Fatalf("seed for %s, which config.EnvVars does not list", name)
		}
		for _, v := range values {
			f.Add(uint8(i), v)
		}
	}
	empty := filepath.Join(f.TempDir(), "empty.toml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name, key := vars[int(which)%len(vars)].Name, vars[int(which)%len(vars)].Key
		getenv := func(k string) string {
			if k == name {
				return value
			}
			return ""
		}
		c, err := config.LoadExcept([]string{key}, empty, getenv)
		if d := config.Default(); err != nil || c.Discovery != d.Discovery || c.HTTP != d.HTTP || c.Transport != d.Transport {
			t.Fatalf("%s=%q with %s unused: %+v, %v; want the defaults", name, value, key, c, err)
		}
		c, err = config.Load(empty, getenv)
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

// FuzzReadTokensFile: any file content gives tokens that are non-empty
// and hold no comma, blank or control character, in the order of their
// lines, or an error; never a panic.
func FuzzReadTokensFile(f *testing.F) {
	f.Add("a-token\n\n# comment\n  b-token  \n")
	f.Add("bad token\n")
	f.Add("")
	f.Add("x,y\r\n\x00\n")
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		toks, err := config.ReadTokensFile(path)
		if err != nil {
			if len(toks) != 0 {
				t.Fatalf("tokens %q with the error %v", toks, err)
			}
			return
		}
		if len(toks) == 0 {
			t.Fatal("no tokens and no error")
		}
		for _, tok := range toks {
			if tok == "" || strings.HasPrefix(tok, "#") || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == ',' || r == 0x7f }) {
				t.Fatalf("token %q from %q", tok, content)
			}
			if !strings.Contains(content, tok) {
				t.Fatalf("token %q is not in the file %q", tok, content)
			}
		}
	})
}
