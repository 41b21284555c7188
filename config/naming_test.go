package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// A section or key spelled in another case is matched as the TOML decoder
// matches struct fields, and a wrong type there is named like any other; an
// integer threshold too large for a float is the threshold's error.
func TestLoadFileOtherCaseAndLargeNumbers(t *testing.T) {
	c, err := config.Load(writeFile(t, t.TempDir(), "[Discovery]\nTTL = \"8s\"\n"), env{}.get)
	if err != nil || c.Discovery.TTL != 8*time.Second {
		t.Fatalf("[Discovery] TTL: %+v %v", c.Discovery, err)
	}
	for _, tc := range []struct{ file, key, want string }{
		{"[DISCOVERY]\nttl = 5\n", "discovery.ttl", `is the integer 5; want a duration in quotes`},
		{"[discovery]\nself_preservation_threshold = 9007199254740993\n", "discovery.self_preservation_threshold", "must be a fraction in [0, 1)"},
	} {
		p := writeFile(t, t.TempDir(), tc.file)
		_, err := config.Load(p, env{}.get)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.key || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want an error on %s saying %q", tc.file, err, tc.key, tc.want)
		}
	}
}

// NameSource names, in an error about a loaded configuration's value (one
// a caller finds after Load), where that value came from, as Load's own
// errors do; a value an override changed, and any value of a Config Load did
// not return, keep Validate's field name.
func TestNameSource(t *testing.T) {
	file := writeFile(t, t.TempDir(), "[discovery]\ndsn = \"sqlite::memory:\"\n")
	c, err := config.Load(file, env{"SWITCHBOARD_DISCOVERY_MAX_TTL": "1m"}.get, func(c *config.Config) { c.Discovery.TTL = 20 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ field, want string }{
		{"dsn", "config " + file + `: discovery.dsn "v": r`},
		{"max_ttl", `SWITCHBOARD_DISCOVERY_MAX_TTL "v": r`},
		{"poll_interval", `discovery.poll_interval (default) "v": r`},
		{"http.listen", `http.listen (default) "v": r`},
		{"ttl", `ttl "v": r`},
		{"name", `name "v": r`},
	} {
		err := c.NameSource(&switchboard.FieldError{Field: tc.field, Value: "v", Reason: "r"})
		if err.Error() != tc.want || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("%s: %q, want %q", tc.field, err, tc.want)
		}
	}
	if err := config.Default().NameSource(&switchboard.FieldError{Field: "dsn", Value: "v", Reason: "r"}); err.Error() != `dsn "v": r` {
		t.Errorf("Default().NameSource: %q", err)
	}
}

// A section or key spelled twice, in different cases, is an error naming
// both spellings and the file, not one of them silently ignored.
func TestLoadFileSpelledTwice(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"[discovery]\nttl = \"8s\"\n[Discovery]\nttl = \"9s\"\n", "[Discovery] and [discovery] are the same section; keep one"},
		{"[Discovery]\nttl = \"8s\"\n[discovery]\nmax_ttl = \"2h\"\n[DISCOVERY]\n", "[DISCOVERY], [Discovery] and [discovery] are the same section; keep one"},
		{"[discovery]\nttl = \"8s\"\nTTL = \"9s\"\n", "TTL and ttl are the same key of [discovery]; keep one"},
		{"[Transport]\ntls_ca = \"a.pem\"\nTLS_CA = \"b.pem\"\n", "TLS_CA and tls_ca are the same key of [Transport]; keep one"},
		// Dotted keys make the same tables.
		{"discovery.ttl = \"8s\"\nDiscovery.ttl = \"9s\"\n", "[Discovery] and [discovery] are the same section; keep one"},
		{"http.listen = \":1\"\nhttp.Listen = \":2\"\n", "Listen and listen are the same key of [http]; keep one"},
	} {
		p := writeFile(t, t.TempDir(), tc.file)
		c, err := config.Load(p, env{}.get)
		if err == nil || err.Error() != "config "+p+": "+tc.want {
			t.Errorf("%q: %+v, %v; want the error %q", tc.file, c, err, "config "+p+": "+tc.want)
		}
	}
	// Once, in any case, is fine.
	c, err := config.Load(writeFile(t, t.TempDir(), "[Discovery]\nTTL = \"8s\"\n[http]\nlisten = \":1\"\n"), env{}.get)
	if err != nil || c.Discovery.TTL != 8*time.Second || c.HTTP.Listen != ":1" {
		t.Fatalf("[Discovery] TTL, [http] listen: %+v %v", c, err)
	}
}
