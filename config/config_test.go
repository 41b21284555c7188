package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// env is a fake getenv.
type env map[string]string

func (e env) get(k string) string { return e[k] }

func writeFile(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, config.DefaultFile)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var specDefaults = config.Discovery{
	DSN:               "sqlite://.data/switchboard.db",
	HeartbeatInterval: 3 * time.Second,
	PollInterval:      30 * time.Second,
	TTL:               10 * time.Second,
	MaxTTL:            time.Hour,

	SelfPreservationThreshold: 0.5,
	SelfPreservationMin:       10,
	Weight:                    100,
	DrainWait:                 2 * time.Second,
}

func TestDefault(t *testing.T) {
	if got := config.Default().Discovery; got != specDefaults {
		t.Fatalf("Default() = %+v, want the documented defaults %+v", got, specDefaults)
	}
	if err := config.Default().Validate(); err != nil {
		t.Fatalf("Default().Validate(): %v", err)
	}
	o := config.Default().Options()
	if o.DefaultTTL != 10*time.Second || o.PollInterval != 30*time.Second {
		t.Fatalf("Default().Options() = %+v", o)
	}
}

func TestLoadNoFileGivesDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := config.Load("", env{}.get)
	if err != nil {
		t.Fatalf("Load without a switchboard.toml: %v", err)
	}
	if c.Discovery != specDefaults {
		t.Fatalf("Load = %+v, want %+v", c.Discovery, specDefaults)
	}
}

func TestLoadMissingExplicitFile(t *testing.T) {
	t.Chdir(t.TempDir())
	p := filepath.Join(t.TempDir(), "nope.toml")
	_, err := config.Load(p, env{}.get)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.toml") {
		t.Fatalf("Load(%q) = %v, want a not-exist error naming the file", p, err)
	}
}

func TestLoadFile(t *testing.T) {
	p := writeFile(t, t.TempDir(), `
# seed-compatible section
[discovery]
dsn = "postgres://switchboard@127.0.0.1:5432/switchboard"
heartbeat_interval = "2s"
poll_interval = "1m"
ttl = "15s"
`)
	c, err := config.Load(p, env{}.get)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := config.Discovery{
		DSN:               "postgres://switchboard@127.0.0.1:5432/switchboard",
		HeartbeatInterval: 2 * time.Second,
		PollInterval:      time.Minute,
		TTL:               15 * time.Second,
		MaxTTL:            time.Hour,

		SelfPreservationThreshold: 0.5,
		SelfPreservationMin:       10,
		Weight:                    100,
		DrainWait:                 2 * time.Second,
	}
	if c.Discovery != want {
		t.Fatalf("Load = %+v, want %+v", c.Discovery, want)
	}
}

func TestLoadPartialFileKeepsDefaults(t *testing.T) {
	p := writeFile(t, t.TempDir(), "[discovery]\nttl = \"20s\"\n")
	c, err := config.Load(p, env{}.get)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := specDefaults
	want.TTL = 20 * time.Second
	if c.Discovery != want {
		t.Fatalf("Load = %+v, want %+v", c.Discovery, want)
	}
}

func TestLoadDefaultFileFromCwd(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "[discovery]\ndsn = \"sqlite://from-cwd.db\"\n")
	t.Chdir(dir)
	c, err := config.Load("", env{}.get)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Discovery.DSN != "sqlite://from-cwd.db" {
		t.Fatalf("DSN = %q: the default file in the working directory was not read", c.Discovery.DSN)
	}
}

func TestLoadEnvWinsOverFile(t *testing.T) {
	p := writeFile(t, t.TempDir(), `[discovery]
dsn = "sqlite://file.db"
heartbeat_interval = "2s"
poll_interval = "1m"
ttl = "15s"
`)
	e := env{
		"SWITCHBOARD_DISCOVERY_DSN":                "sqlite://env.db",
		"SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL": "500ms",
		"SWITCHBOARD_DISCOVERY_POLL_INTERVAL":      "5s",
		"SWITCHBOARD_DISCOVERY_TTL":                "4s",
	}
	c, err := config.Load(p, e.get)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := config.Discovery{DSN: "sqlite://env.db", HeartbeatInterval: 500 * time.Millisecond, PollInterval: 5 * time.Second, TTL: 4 * time.Second, MaxTTL: time.Hour,
		SelfPreservationThreshold: 0.5, SelfPreservationMin: 10, Weight: 100, DrainWait: 2 * time.Second}
	if c.Discovery != want {
		t.Fatalf("Load = %+v, want %+v", c.Discovery, want)
	}

	// Only the variables that are set override; the rest stays from the file.
	c, err = config.Load(p, env{"SWITCHBOARD_DISCOVERY_TTL": "30s"}.get)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want = config.Discovery{DSN: "sqlite://file.db", HeartbeatInterval: 2 * time.Second, PollInterval: time.Minute, TTL: 30 * time.Second, MaxTTL: time.Hour,
		SelfPreservationThreshold: 0.5, SelfPreservationMin: 10, Weight: 100, DrainWait: 2 * time.Second}
	if c.Discovery != want {
		t.Fatalf("Load = %+v, want %+v", c.Discovery, want)
	}
}

func TestLoadNilGetenvUsesEnvironment(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("SWITCHBOARD_DISCOVERY_DSN", "sqlite://real-env.db")
	c, err := config.Load("", nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Discovery.DSN != "sqlite://real-env.db" {
		t.Fatalf("DSN = %q, want the process environment read when getenv is nil", c.Discovery.DSN)
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		file string // "" for no file
		env  env
		want []string // fragments of the error
		is   error    // nil: not checked
	}{
		{"unknown key", "[discovery]\ndsn = \"sqlite://x.db\"\nheartbeat = \"3s\"\n", nil,
			[]string{"unknown", "discovery.heartbeat"}, nil},
		{"unknown section", "[discovery]\nttl = \"10s\"\n[server]\nlisten = \":8080\"\n", nil,
			[]string{"unknown", "server"}, nil},
		{"unknown top-level key", "dsn = \"sqlite://x.db\"\n", nil,
			[]string{"unknown", "dsn"}, nil},
		{"bad heartbeat in file", "[discovery]\nheartbeat_interval = \"soon\"\n", nil,
			[]string{"discovery.heartbeat_interval", "soon"}, switchboard.ErrInvalid},
		{"bad poll in file", "[discovery]\npoll_interval = \"30\"\n", nil,
			[]string{"discovery.poll_interval"}, switchboard.ErrInvalid},
		{"zero ttl in file", "[discovery]\nttl = \"0s\"\n", nil,
			[]string{"discovery.ttl", "positive"}, switchboard.ErrInvalid},
		{"negative ttl in file", "[discovery]\nttl = \"-10s\"\n", nil,
			[]string{"discovery.ttl", "positive"}, switchboard.ErrInvalid},
		{"empty ttl in file", "[discovery]\nttl = \"\"\n", nil,
			[]string{"discovery.ttl"}, switchboard.ErrInvalid},
		{"duration not a string", "[discovery]\nttl = 10\n", nil,
			[]string{"ttl"}, nil},
		{"bad toml", "[discovery\n", nil, []string{config.DefaultFile}, nil},
		{"self-preservation threshold of 1", "[discovery]\nself_preservation_threshold = 1.0\n", nil,
			[]string{"self_preservation_threshold", "[0, 1)"}, switchboard.ErrInvalid},
		{"negative self-preservation threshold in env", "", env{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD": "-0.5"},
			[]string{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD", "-0.5", "[0, 1)"}, switchboard.ErrInvalid},
		{"self-preservation threshold not a number in env", "", env{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD": "half"},
			[]string{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD", "half"}, switchboard.ErrInvalid},
		{"self-preservation min of 0", "[discovery]\nself_preservation_min = 0\n", nil,
			[]string{"self_preservation_min", "at least 1"}, switchboard.ErrInvalid},
		{"self-preservation min not a number in env", "", env{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN": "many"},
			[]string{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN", "many"}, switchboard.ErrInvalid},
		{"bad ttl in env", "", env{"SWITCHBOARD_DISCOVERY_TTL": "ten"},
			[]string{"SWITCHBOARD_DISCOVERY_TTL", "ten"}, switchboard.ErrInvalid},
		{"bad heartbeat in env", "", env{"SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL": "-1s"},
			[]string{"SWITCHBOARD_DISCOVERY_HEARTBEAT_INTERVAL"}, switchboard.ErrInvalid},
		{"bad poll in env", "", env{"SWITCHBOARD_DISCOVERY_POLL_INTERVAL": "0"},
			[]string{"SWITCHBOARD_DISCOVERY_POLL_INTERVAL"}, switchboard.ErrInvalid},
		{"heartbeat equal to ttl", "[discovery]\nheartbeat_interval = \"10s\"\nttl = \"10s\"\n", nil,
			[]string{"heartbeat_interval", "ttl"}, switchboard.ErrInvalid},
		{"tls cert without key", "[http]\ntls_cert = \"cert.pem\"\n", nil,
			[]string{"tls_cert", "tls_key"}, switchboard.ErrInvalid},
		{"unknown http key", "[http]\nport = 7400\n", nil,
			[]string{"unknown", "http.port"}, nil},
		{"heartbeat above ttl", "[discovery]\nheartbeat_interval = \"3s\"\nttl = \"2s\"\n", nil,
			[]string{"heartbeat_interval", "half the ttl"}, switchboard.ErrInvalid},
		{"heartbeat above ttl from env", "", env{"SWITCHBOARD_DISCOVERY_TTL": "1s"},
			[]string{"heartbeat_interval", "half the ttl"}, switchboard.ErrInvalid},
		{"ttl over max_ttl", "[discovery]\nttl = \"2h\"\nheartbeat_interval = \"1m\"\n", nil,
			[]string{"ttl", "max_ttl (1h0m0s)"}, switchboard.ErrInvalid},
		{"ttl over max_ttl from env", "[discovery]\nheartbeat_interval = \"1s\"\n", env{"SWITCHBOARD_DISCOVERY_MAX_TTL": "5s"},
			[]string{"ttl", "max_ttl (5s)"}, switchboard.ErrInvalid},
		{"bad max_ttl in file", "[discovery]\nmax_ttl = \"forever\"\n", nil,
			[]string{"discovery.max_ttl"}, switchboard.ErrInvalid},
		{"bad dsn in file", "[discovery]\ndsn = \"mysql://x\"\n", nil,
			[]string{"dsn", "mysql"}, switchboard.ErrInvalidDSN},
		{"bad dsn in env", "", env{"SWITCHBOARD_DISCOVERY_DSN": "sqlite://"},
			[]string{"SWITCHBOARD_DISCOVERY_DSN", "sqlite://"}, switchboard.ErrInvalidDSN},
		{"empty dsn in file", "[discovery]\ndsn = \"\"\n", nil,
			[]string{"dsn"}, switchboard.ErrInvalidDSN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			path := ""
			if tt.file != "" {
				path = writeFile(t, dir, tt.file)
			}
			c, err := config.Load(path, tt.env.get)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if c != (config.Config{}) {
				t.Errorf("Load returned %+v with an error", c)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*config.Discovery)
		field  string // "" when valid
	}{
		{"defaults", func(*config.Discovery) {}, ""},
		{"memory dsn", func(d *config.Discovery) { d.DSN = "sqlite::memory:" }, ""},
		{"heartbeat at half the ttl", func(d *config.Discovery) { d.HeartbeatInterval = d.TTL / 2 }, ""},
		{"heartbeat just over half the ttl", func(d *config.Discovery) { d.HeartbeatInterval = d.TTL/2 + 1 }, "heartbeat_interval"},
		{"heartbeat just under ttl", func(d *config.Discovery) { d.HeartbeatInterval = d.TTL - 1 }, "heartbeat_interval"},
		{"ttl at max_ttl", func(d *config.Discovery) { d.TTL = d.MaxTTL }, ""},
		{"ttl over max_ttl", func(d *config.Discovery) { d.TTL = d.MaxTTL + time.Second }, "ttl"},
		{"zero max_ttl", func(d *config.Discovery) { d.MaxTTL = 0 }, "max_ttl"},
		{"zero heartbeat", func(d *config.Discovery) { d.HeartbeatInterval = 0 }, "heartbeat_interval"},
		{"zero poll", func(d *config.Discovery) { d.PollInterval = 0 }, "poll_interval"},
		{"negative ttl", func(d *config.Discovery) { d.TTL = -time.Second }, "ttl"},
		{"heartbeat = ttl", func(d *config.Discovery) { d.HeartbeatInterval = d.TTL }, "heartbeat_interval"},
		{"bad dsn", func(d *config.Discovery) { d.DSN = "nope" }, "dsn"},
	}
	for _, tt := range tests {
		c := config.Default()
		tt.mutate(&c.Discovery)
		err := c.Validate()
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: Validate: %v", tt.name, err)
			}
			continue
		}
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want an invalid-%s FieldError", tt.name, err, tt.field)
		}
	}
}

func TestOverridesWinAndFixBadValues(t *testing.T) {
	env := map[string]string{"SWITCHBOARD_DISCOVERY_DSN": "mysql://nope"}
	if _, err := config.Load("", func(k string) string { return env[k] }); err == nil {
		t.Fatal("a bad DSN from the environment was accepted")
	}
	c, err := config.Load("", func(k string) string { return env[k] }, func(c *config.Config) {
		c.Discovery.DSN = "sqlite://flag.db"
	})
	if err != nil {
		t.Fatalf("the flag's DSN should replace the environment's: %v", err)
	}
	if c.Discovery.DSN != "sqlite://flag.db" {
		t.Fatalf("dsn = %q", c.Discovery.DSN)
	}
}

func TestHTTPSection(t *testing.T) {
	if got := config.Default().HTTP; got != (config.HTTP{Listen: config.DefaultListen, RequestTimeout: config.DefaultRequestTimeout,
		MaxLeaseTTL: config.DefaultMaxLeaseTTL, MaxInstances: 100000, MaxInstancesMiB: 512, MaxLeases: 10000, MaxWatchers: 1000}) {
		t.Fatalf("default [http] = %+v", got)
	}
	p := writeFile(t, t.TempDir(), `[http]
listen = "0.0.0.0:7400"
token = "from-file"
tls_cert = "cert.pem"
tls_key = "key.pem"
`)
	c, err := config.Load(p, env{"SWITCHBOARD_HTTP_TOKEN": "from-env"}.get)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default().HTTP
	want.Listen, want.Token, want.TLSCert, want.TLSKey = "0.0.0.0:7400", "from-env", "cert.pem", "key.pem"
	if c.HTTP != want {
		t.Fatalf("[http] = %+v, want %+v", c.HTTP, want)
	}
}

// [http] request_timeout (the CLI's remote catalog's request timeout):
// 30s by default, set by the file, the environment or an override; it must
// be positive, and an error names where the wrong value came from.
func TestHTTPRequestTimeout(t *testing.T) {
	if got := config.Default().HTTP.RequestTimeout; got != 30*time.Second {
		t.Fatalf("default request_timeout %s, want 30s", got)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	p := writeFile(t, dir, "[http]\nrequest_timeout = \"5s\"\n")
	if c, err := config.Load(p, env{}.get); err != nil || c.HTTP.RequestTimeout != 5*time.Second {
		t.Fatalf("from the file: %s, %v", c.HTTP.RequestTimeout, err)
	}
	if c, err := config.Load(p, env{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "250ms"}.get); err != nil || c.HTTP.RequestTimeout != 250*time.Millisecond {
		t.Fatalf("from the environment: %s, %v", c.HTTP.RequestTimeout, err)
	}
	if c, err := config.Load(p, env{}.get, func(c *config.Config) { c.HTTP.RequestTimeout = time.Minute }); err != nil || c.HTTP.RequestTimeout != time.Minute {
		t.Fatalf("from an override: %s, %v", c.HTTP.RequestTimeout, err)
	}
	for _, tc := range []struct {
		name     string
		file     string
		env      env
		override *time.Duration // nil: none
		want     string
	}{
		{"zero in the environment", "", env{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "0s"}, nil, `SWITCHBOARD_HTTP_REQUEST_TIMEOUT "0s": must be positive`},
		{"negative in the environment", "", env{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "-1s"}, nil, `SWITCHBOARD_HTTP_REQUEST_TIMEOUT "-1s": must be positive`},
		{"not a duration in the environment", "", env{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "soon"}, nil, `SWITCHBOARD_HTTP_REQUEST_TIMEOUT "soon": not a duration`},
		{"zero in the file", "[http]\nrequest_timeout = \"0s\"\n", nil, nil, `: http.request_timeout "0s": must be positive`},
		{"a number in the file", "[http]\nrequest_timeout = 30\n", nil, nil, `http.request_timeout: is the integer 30; want a duration in quotes`},
		{"zero from an override", "", nil, new(time.Duration(0)), `http.request_timeout "0s": must be positive`},
		{"negative from an override", "", nil, new(-time.Second), `http.request_timeout "-1s": must be positive`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, t.TempDir(), tc.file)
			}
			var overrides []func(*config.Config)
			if tc.override != nil {
				overrides = append(overrides, func(c *config.Config) { c.HTTP.RequestTimeout = *tc.override })
			}
			_, err := config.Load(path, tc.env.get, overrides...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("Load = %v, want an invalid-value error with %q", err, tc.want)
			}
		})
	}
}

// LoadExcept: a key the caller does not use (a server's
// http.request_timeout) is read from neither the file nor the environment,
// so no value of it, however wrong, fails the load, which Load refuses; an
// override still sets it, unchecked. The other keys are read and checked as
// by Load, those checked after it too, and a check across keys is skipped
// with the unused one (a default heartbeat too long for the ttl). A name
// that is no key is an error.
func TestLoadExcept(t *testing.T) {
	t.Chdir(t.TempDir())
	unused := []string{"http.request_timeout"}
	for _, tc := range []struct {
		name, file string
		env        env
	}{
		{"zero in the environment", "", env{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "0"}},
		{"not a duration in the environment", "", env{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "soon"}},
		{"zero in the file", "[http]\nrequest_timeout = \"0s\"\n", nil},
		{"not a duration in the file", "[http]\nrequest_timeout = \"soon\"\n", nil},
		{"a number in the file", "[http]\nrequest_timeout = 30\n", nil},
		{"two spellings in the file", "[http]\nrequest_timeout = \"1s\"\nREQUEST_TIMEOUT = \"2s\"\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, t.TempDir(), tc.file+"[discovery]\nttl = \"20s\"\n")
			}
			if _, err := config.Load(path, tc.env.get); err == nil || !strings.Contains(strings.ToLower(err.Error()), "request_timeout") {
				t.Fatalf("Load = %v, want an error about request_timeout", err)
			}
			c, err := config.LoadExcept(unused, path, tc.env.get)
			if err != nil || c.HTTP.RequestTimeout != config.DefaultRequestTimeout {
				t.Fatalf("LoadExcept = %s, %v; want the default %s", c.HTTP.RequestTimeout, err, config.DefaultRequestTimeout)
			}
			if tc.file != "" && c.Discovery.TTL != 20*time.Second {
				t.Fatalf("the file's other keys are read too: ttl %s, want 20s", c.Discovery.TTL)
			}
		})
	}
	c, err := config.LoadExcept(unused, "", env{}.get, func(c *config.Config) { c.HTTP.RequestTimeout = -time.Second })
	if err != nil || c.HTTP.RequestTimeout != -time.Second {
		t.Fatalf("an override: %s, %v; want -1s, unchecked", c.HTTP.RequestTimeout, err)
	}
	// Checked after it: the override's bad value, skipped, hides neither.
	zero := func(c *config.Config) { c.HTTP.RequestTimeout = 0 }
	for name, value := range map[string]string{"SWITCHBOARD_HTTP_TLS_KEY": "k.pem", "SWITCHBOARD_DISCOVERY_TTL": "2h"} {
		_, err := config.LoadExcept(unused, "", env{name: value}.get, zero)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != name {
			t.Errorf("%s=%q: LoadExcept = %v, want an error naming %s", name, value, err, name)
		}
	}
	short := env{"SWITCHBOARD_DISCOVERY_TTL": "4s"} // the default heartbeat, 3s, is over half of it
	if _, err := config.Load("", short.get); err == nil {
		t.Fatal("Load took a ttl of 4s with the default heartbeat")
	}
	if c, err := config.LoadExcept([]string{"discovery.heartbeat_interval"}, "", short.get); err != nil || c.Discovery.TTL != 4*time.Second {
		t.Fatalf("heartbeat unused: %+v, %v", c.Discovery, err)
	}
	if _, err := config.LoadExcept([]string{"http.timeout"}, "", env{}.get); err == nil || !strings.Contains(err.Error(), `"http.timeout" is not a key`) {
		t.Fatalf("an unknown key: %v", err)
	}
}

// KeyOf is the key of a validation field: [discovery]'s fields have no
// section, the others have theirs.
func TestKeyOf(t *testing.T) {
	for field, want := range map[string]string{"ttl": "discovery.ttl", "dsn": "discovery.dsn",
		"http.listen": "http.listen", "transport.tls_ca": "transport.tls_ca", "http.request_timeout": "http.request_timeout"} {
		if got := config.KeyOf(field); got != want {
			t.Errorf("KeyOf(%q) = %q, want %q", field, got, want)
		}
	}
}

func TestTransportSection(t *testing.T) {
	if got := config.Default().Transport; got != (config.Transport{}) {
		t.Fatalf("default [transport] = %+v, want plaintext", got)
	}
	p := writeFile(t, t.TempDir(), `[transport]
tls_cert = "cert.pem"
tls_key = "key.pem"
tls_ca = "ca.pem"
`)
	c, err := config.Load(p, env{"SWITCHBOARD_TRANSPORT_TLS_CA": "/etc/ca.pem"}.get)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Transport{TLSCert: "cert.pem", TLSKey: "key.pem", TLSCA: "/etc/ca.pem"}
	if c.Transport != want {
		t.Fatalf("[transport] = %+v, want %+v", c.Transport, want)
	}
	c, err = config.Load("", env{"SWITCHBOARD_TRANSPORT_TLS_CERT": "c.pem", "SWITCHBOARD_TRANSPORT_TLS_KEY": "k.pem"}.get)
	if err != nil || c.Transport != (config.Transport{TLSCert: "c.pem", TLSKey: "k.pem"}) {
		t.Fatalf("environment: %+v %v", c.Transport, err)
	}
	bad := writeFile(t, t.TempDir(), "[transport]\ntls_key = \"key.pem\"\n")
	if _, err := config.Load(bad, env{}.get); err == nil || !strings.Contains(err.Error(), "transport.tls_cert") {
		t.Fatalf("a key without a certificate: %v", err)
	}
	unknown := writeFile(t, t.TempDir(), "[transport]\ntls = true\n")
	if _, err := config.Load(unknown, env{}.get); err == nil || !strings.Contains(err.Error(), "transport.tls") {
		t.Fatalf("unknown key: %v", err)
	}
}

// [discovery] self_preservation_threshold (0 disables) and
// self_preservation_min, from the file and the environment, into Options.
func TestSelfPreservationKeys(t *testing.T) {
	p := writeFile(t, t.TempDir(), "[discovery]\nself_preservation_threshold = 0.75\nself_preservation_min = 4\n")
	c, err := config.Load(p, env{}.get)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options(); o.SelfPreservationThreshold != 0.75 || o.SelfPreservationMin != 4 {
		t.Fatalf("Options() = %+v", o)
	}
	c, err = config.Load(p, env{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD": "0", "SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN": "12"}.get)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options(); o.SelfPreservationThreshold >= 0 || o.SelfPreservationMin != 12 {
		t.Fatalf("threshold 0 must disable (negative in Options): %+v", o)
	}
	p = writeFile(t, t.TempDir(), "[discovery]\nself_preservation_threshold = 0\n")
	if c, err = config.Load(p, env{}.get); err != nil || c.Options().SelfPreservationThreshold >= 0 {
		t.Fatalf("integer 0 in the file: %+v, %v", c.Discovery, err)
	}
}

// [http] listen must be host:port: an empty value would make serve listen
// on a random port of every interface, a port alone fails only at listen.
func TestHTTPListenValidated(t *testing.T) {
	for _, bad := range []string{"", "7400", "127.0.0.1", "127.0.0.1:http-ish", "127.0.0.1:70000", "[::1]"} {
		p := writeFile(t, t.TempDir(), "[http]\nlisten = \""+bad+"\"\n")
		_, err := config.Load(p, env{}.get)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "http.listen" || fe.Value != bad {
			t.Errorf("listen %q: %v, want a field error naming http.listen", bad, err)
		}
	}
	for _, good := range []string{"127.0.0.1:7400", ":7400", "[::1]:0", "localhost:8080", "0.0.0.0:65535"} {
		if _, err := config.Load("", env{"SWITCHBOARD_HTTP_LISTEN": good}.get); err != nil {
			t.Errorf("listen %q: %v", good, err)
		}
	}
	// A flag (an override) replacing a bad value from the file is fine.
	p := writeFile(t, t.TempDir(), "[http]\nlisten = \"\"\n")
	if _, err := config.Load(p, env{}.get, func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:0" }); err != nil {
		t.Errorf("override of a bad listen: %v", err)
	}
}

// A validation error names where the wrong value came from: the variable
// that set it, the file's key (and the file), "(default)" for a value
// nobody set, and Validate's own field name for a value an override (a
// flag) set, for the caller to name its flag. The sentinel stays reachable.
func TestLoadErrorsNameTheSource(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tests := []struct {
		name      string
		file      string
		env       env
		override  func(*config.Config)
		field     string   // the FieldError's field
		fragments []string // in the message
	}{
		{"threshold from env", "", env{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD": "1.5"}, nil,
			"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_THRESHOLD", []string{`"1.5"`, "[0, 1)"}},
		{"threshold from file", "[discovery]\nself_preservation_threshold = 2.0\n", nil, nil,
			"discovery.self_preservation_threshold", []string{config.DefaultFile, `"2"`, "[0, 1)"}},
		{"min from env", "", env{"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN": "0"}, nil,
			"SWITCHBOARD_DISCOVERY_SELF_PRESERVATION_MIN", []string{`"0"`, "at least 1"}},
		{"ttl over max_ttl from env", "", env{"SWITCHBOARD_DISCOVERY_TTL": "2h"}, nil,
			"SWITCHBOARD_DISCOVERY_TTL", []string{`"2h0m0s"`, "max_ttl"}},
		{"default heartbeat too long for the env's ttl", "", env{"SWITCHBOARD_DISCOVERY_TTL": "4s"}, nil,
			"discovery.heartbeat_interval (default)", []string{`"3s"`, "half the ttl (4s)"}},
		{"listen from env", "", env{"SWITCHBOARD_HTTP_LISTEN": "7400"}, nil,
			"SWITCHBOARD_HTTP_LISTEN", []string{`"7400"`, "host:port"}},
		{"tls key alone from env", "", env{"SWITCHBOARD_HTTP_TLS_KEY": "key.pem"}, nil,
			"SWITCHBOARD_HTTP_TLS_KEY", []string{`"key.pem"`, "http.tls_cert is not set"}},
		{"transport cert alone from file", "[transport]\ntls_cert = \"c.pem\"\n", nil, nil,
			"transport.tls_cert", []string{config.DefaultFile, `"c.pem"`, "transport.tls_key is not set"}},
		{"nats transport from the SDK's variable", "", env{"TINY_NATS_TRANSPORT": "durable"}, nil,
			"TINY_NATS_TRANSPORT", []string{`"durable"`, "jetstream"}},
		{"ttl from an override", "", env{"SWITCHBOARD_DISCOVERY_TTL": "30s"}, func(c *config.Config) { c.Discovery.TTL = 2 * time.Hour },
			"ttl", []string{"max_ttl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, t.TempDir(), tt.file)
			}
			var overrides []func(*config.Config)
			if tt.override != nil {
				overrides = append(overrides, tt.override)
			}
			_, err := config.Load(path, tt.env.get, overrides...)
			var fe *switchboard.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("Load = %v, want an invalid-value error on %q", err, tt.field)
			}
			for _, f := range append(tt.fragments, tt.field) {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not mention %q", err, f)
				}
			}
		})
	}
}

// A value of the wrong TOML type is named by its key, with the value and
// what the key wants; a section that is not a table too (the decoder's own
// message names Go types: "destination has type string", a struct dump).
func TestLoadFileTypeErrors(t *testing.T) {
	for _, tc := range []struct{ file, key, want string }{
		{"[discovery]\nttl = 10\n", "discovery.ttl", `is the integer 10; want a duration in quotes, such as "10s"`},
		{"[discovery]\nheartbeat_interval = 2.5\n", "discovery.heartbeat_interval", "is the number 2.5; want a duration"},
		{"[discovery]\nself_preservation_min = \"10\"\n", "discovery.self_preservation_min", `is the string "10"; want a whole number`},
		{"[discovery]\nself_preservation_min = 1.5\n", "discovery.self_preservation_min", "is the number 1.5; want a whole number"},
		{"[discovery]\nself_preservation_threshold = \"0.5\"\n", "discovery.self_preservation_threshold", `is the string "0.5"; want a number`},
		{"[http]\nlisten = 7400\n", "http.listen", "is the integer 7400; want a string in quotes"},
		{"[transport]\nnats_url = [\"nats://a:4222\"]\n", "transport.nats_url", "is an array; want a string"},
		{"[http]\ntoken = true\n", "http.token", "is the boolean true; want a string"},
		{"discovery = 1\n", "discovery", "is the integer 1; want a table"},
		{"[[transport]]\nnats_url = \"nats://a:4222\"\n", "transport", "is an array; want a table"},
	} {
		p := writeFile(t, t.TempDir(), tc.file)
		_, err := config.Load(p, env{}.get)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.key || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) ||
			strings.Contains(err.Error(), "destination") || strings.Contains(err.Error(), "struct") {
			t.Errorf("%q: %v, want an error on %s saying %q", tc.file, err, tc.key, tc.want)
		}
	}
	// Whole numbers are fractions too.
	if c, err := config.Load(writeFile(t, t.TempDir(), "[discovery]\nself_preservation_threshold = 0\n"), env{}.get); err != nil || c.Discovery.SelfPreservationThreshold != 0 {
		t.Errorf("threshold 0: %+v %v", c.Discovery, err)
	}
}

// poll_interval is a full re-read of the catalog by every watching process:
// under MinPollInterval it is a busy loop, refused wherever it is set.
func TestPollIntervalFloor(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		file  string
		env   env
		field string
	}{
		{"[discovery]\npoll_interval = \"1ns\"\n", nil, "discovery.poll_interval"},
		{"[discovery]\npoll_interval = \"999ms\"\n", nil, "discovery.poll_interval"},
		{"", env{"SWITCHBOARD_DISCOVERY_POLL_INTERVAL": "10ms"}, "SWITCHBOARD_DISCOVERY_POLL_INTERVAL"},
	} {
		path := ""
		if tc.file != "" {
			path = writeFile(t, t.TempDir(), tc.file)
		}
		_, err := config.Load(path, tc.env.get)
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), "at least 1s") {
			t.Errorf("%q %v: %v, want an error on %s", tc.file, tc.env, err, tc.field)
		}
	}
	if _, err := config.Load("", env{"SWITCHBOARD_DISCOVERY_POLL_INTERVAL": "1s"}.get); err != nil {
		t.Errorf("poll_interval 1s: %v", err)
	}
	c := config.Default()
	c.Discovery.PollInterval = time.Millisecond
	var fe *switchboard.FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "poll_interval" {
		t.Errorf("Validate with poll_interval 1ms: %v", err)
	}
}

// TestTokenFiles: token_file and admin_token_file (from the file or the
// environment) fill the tokens from the files' first lines; a token set
// both ways is refused naming the key, unless a flag set it; an empty or
// missing file is refused saying so.
func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, dir, "client-secret-token\n")
	adm := filepath.Join(dir, "admin")
	if err := os.WriteFile(adm, []byte("  admin-secret-token  \nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load("", env{"SWITCHBOARD_HTTP_TOKEN_FILE": tok, "SWITCHBOARD_HTTP_ADMIN_TOKEN_FILE": adm}.get)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Token != "client-secret-token" || c.HTTP.AdminToken != "admin-secret-token" {
		t.Fatalf("tokens %q %q", c.HTTP.Token, c.HTTP.AdminToken)
	}
	_, err = config.Load("", env{"SWITCHBOARD_HTTP_TOKEN_FILE": tok, "SWITCHBOARD_HTTP_TOKEN": "x"}.get)
	if err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_HTTP_TOKEN_FILE") || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("token and token file: %v", err)
	}
	c, err = config.Load("", env{"SWITCHBOARD_HTTP_TOKEN_FILE": tok}.get, func(c *config.Config) { c.HTTP.Token = "flag" })
	if err != nil || c.HTTP.Token != "flag" {
		t.Fatalf("a flag's token over the file's: %q %v", c.HTTP.Token, err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, f := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := config.Load("", env{"SWITCHBOARD_HTTP_ADMIN_TOKEN_FILE": f}.get); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_HTTP_ADMIN_TOKEN_FILE") {
			t.Fatalf("admin token file %s: %v", f, err)
		}
	}
	if _, err := config.Load("", env{"SWITCHBOARD_HTTP_TOKEN": "same", "SWITCHBOARD_HTTP_ADMIN_TOKEN": "same"}.get); err == nil || strings.Contains(err.Error(), "same") {
		t.Fatalf("admin token equal to the token: %v", err)
	}
}

// TestTokensFileAndPerTokenQuotas: tokens_file fills tokens with the
// file's lines (blank and # lines skipped); set with tokens it is refused
// unless a flag set them; a file without a token, or with a token holding
// a blank, is refused naming the line; no client token may be the admin
// token (never echoed); the per-token quotas default to 0 (none) and
// refuse negative values.
func TestTokensFileAndPerTokenQuotas(t *testing.T) {
	dir := t.TempDir()
	toks := writeFile(t, dir, "# tenants\ntenant-a-token\n\n  tenant-b-token  \n")
	c, err := config.Load("", env{"SWITCHBOARD_HTTP_TOKENS_FILE": toks, "SWITCHBOARD_HTTP_MAX_INSTANCES_PER_TOKEN": "50",
		"SWITCHBOARD_HTTP_MAX_LEASES_PER_TOKEN": "5", "SWITCHBOARD_HTTP_MAX_WATCHERS_PER_TOKEN": "8"}.get)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.HTTP.ClientTokens(), " "); got != "tenant-a-token tenant-b-token" {
		t.Fatalf("client tokens %q", got)
	}
	if c.HTTP.MaxInstancesPerToken != 50 || c.HTTP.MaxLeasesPerToken != 5 || c.HTTP.MaxWatchersPerToken != 8 {
		t.Fatalf("per-token quotas %+v", c.HTTP)
	}
	if d := config.Default().HTTP; d.MaxInstancesPerToken != 0 || d.MaxLeasesPerToken != 0 || d.MaxWatchersPerToken != 0 || d.ClientTokens() != nil {
		t.Fatalf("defaults: %+v", d)
	}
	if _, err := config.Load("", env{"SWITCHBOARD_HTTP_TOKENS_FILE": toks, "SWITCHBOARD_HTTP_TOKENS": "x"}.get); err == nil ||
		!strings.Contains(err.Error(), "SWITCHBOARD_HTTP_TOKENS_FILE") || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("tokens and tokens file: %v", err)
	}
	c, err = config.Load("", env{"SWITCHBOARD_HTTP_TOKENS_FILE": toks}.get, func(c *config.Config) { c.HTTP.Tokens = "flag-token" })
	if err != nil || c.HTTP.Tokens != "flag-token" {
		t.Fatalf("a flag's tokens over the file's: %q %v", c.HTTP.Tokens, err)
	}
	for _, tc := range []struct{ content, want string }{
		{"# nothing\n\n", "holds no token"},
		{"good-token\nbad token\n", "line 2"},
	} {
		f := writeFile(t, t.TempDir(), tc.content)
		if _, err := config.Load("", env{"SWITCHBOARD_HTTP_TOKENS_FILE": f}.get); err == nil ||
			!strings.Contains(err.Error(), "SWITCHBOARD_HTTP_TOKENS_FILE") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("tokens file %q: %v; want %q", tc.content, err, tc.want)
		}
	}
	_, err = config.Load("", env{"SWITCHBOARD_HTTP_TOKENS_FILE": toks, "SWITCHBOARD_HTTP_ADMIN_TOKEN": "tenant-b-token"}.get)
	if err == nil || strings.Contains(err.Error(), "tenant-b") || !strings.Contains(err.Error(), "http.tokens") {
		t.Fatalf("admin token among the client tokens: %v", err)
	}
	for _, k := range []string{"SWITCHBOARD_HTTP_MAX_INSTANCES_PER_TOKEN", "SWITCHBOARD_HTTP_MAX_LEASES_PER_TOKEN", "SWITCHBOARD_HTTP_MAX_WATCHERS_PER_TOKEN"} {
		if _, err := config.Load("", env{k: "-1"}.get); err == nil || !strings.Contains(err.Error(), k) || !strings.Contains(err.Error(), "0 (no quota") {
			t.Fatalf("%s=-1: %v", k, err)
		}
	}
}
