package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// cleanEnv runs the test in an empty directory (no switchboard.toml) with
// no configuration variable set.
func cleanEnv(t *testing.T) string {
	dir := t.TempDir()
	t.Chdir(dir)
	clearConfigEnv(t)
	return dir
}

// clearConfigEnv clears, for the test, every variable the configuration
// is read from (config.EnvVars: the SWITCHBOARD_ ones and the SDK's).
func clearConfigEnv(t *testing.T) {
	for _, v := range config.EnvVars() {
		t.Setenv(v.Name, "")
	}
}

// checkUsage runs args and wants exit 2 and one line of stderr starting
// with want.
func checkUsage(t *testing.T, env map[string]string, args []string, want string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	code, stdout, stderr := cli(t, args...)
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "switchboard: "+want) {
		t.Errorf("%v %v: exit %d stdout %q stderr %q; want exit 2 and one line %q…", env, args, code, stdout, stderr, "switchboard: "+want)
	}
	for k := range env {
		t.Setenv(k, "")
	}
}

// TestTLSFileErrorsNameTheirSource: a TLS file (serve's certificate and
// key, the module wire's certificate, key and CA) that cannot be read or
// parsed is an error about the setting that named it, as the user set it:
// the flag, the environment variable, or the config file and key.
func TestTLSFileErrorsNameTheirSource(t *testing.T) {
	dir := cleanEnv(t)
	dsn, _ := dsnIn(t)
	ca := testkit.NewCA(t, "tls sources test CA")
	a, b := ca.IssueValid(t, "a"), ca.IssueValid(t, "b")
	// Relative paths: the messages stay short (a value is cut at 80
	// bytes).
	testkit.WriteFile(t, dir, "a.pem", a.CertPEM)
	testkit.WriteFile(t, dir, "a-key.pem", a.KeyPEM)
	testkit.WriteFile(t, dir, "b-key.pem", b.KeyPEM)
	testkit.WriteFile(t, dir, "ca.pem", ca.PEM)
	testkit.WriteFile(t, dir, "junk.pem", []byte("not PEM\n"))
	testkit.WriteFile(t, dir, "http.toml", []byte("[http]\ntls_cert = \"a.pem\"\ntls_key = \"gone.pem\"\n"))
	testkit.WriteFile(t, dir, "transport.toml", []byte("[transport]\ntls_ca = \"gone.pem\"\n"))
	serve := []string{"serve", "--dsn", dsn, "--listen", "127.0.0.1:0"}
	echo := []string{"echo", "--dsn", dsn, "--name", "e"}
	send := []string{"send", "--dsn", dsn, "--to", "f.m.n:in", "--data", "x"}
	with := func(args []string, more ...string) []string { return append(append([]string(nil), args...), more...) }
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		// serve: [http] tls_cert and tls_key.
		{nil, with(serve, "--tls-cert", "gone.pem", "--tls-key", "a-key.pem"), `--tls-cert "gone.pem": cannot be read: no such file or directory`},
		{nil, with(serve, "--tls-cert", "a.pem", "--tls-key", "gone.pem"), `--tls-key "gone.pem": cannot be read: no such file or directory`},
		{nil, with(serve, "--tls-cert", "junk.pem", "--tls-key", "a-key.pem"), `--tls-cert "junk.pem": holds no PEM certificate`},
		{nil, with(serve, "--tls-cert", "a.pem", "--tls-key", "junk.pem"), `--tls-key "junk.pem": is not the PEM private key of the certificate a.pem`},
		{nil, with(serve, "--tls-cert", "a.pem", "--tls-key", "b-key.pem"), `--tls-key "b-key.pem": is not the PEM private key of the certificate a.pem: tls: private key does not match public key`},
		{map[string]string{"SWITCHBOARD_HTTP_TLS_CERT": "gone.pem", "SWITCHBOARD_HTTP_TLS_KEY": "a-key.pem"}, serve,
			`SWITCHBOARD_HTTP_TLS_CERT "gone.pem": cannot be read`},
		{nil, with(serve, "--config", "http.toml"), `config http.toml: http.tls_key "gone.pem": cannot be read`},
		// echo and send: [transport] tls_cert, tls_key and tls_ca.
		{nil, with(echo, "--tls-cert", "gone.pem", "--tls-key", "a-key.pem"), `--tls-cert "gone.pem": cannot be read`},
		{nil, with(echo, "--tls-cert", "a.pem", "--tls-key", "a-key.pem", "--tls-ca", "junk.pem"), `--tls-ca "junk.pem": holds no PEM certificate`},
		{map[string]string{"SWITCHBOARD_TRANSPORT_TLS_KEY": "b-key.pem"}, with(echo, "--tls-cert", "a.pem"),
			`SWITCHBOARD_TRANSPORT_TLS_KEY "b-key.pem": is not the PEM private key of the certificate a.pem`},
		{nil, with(send, "--tls-ca", "gone.pem"), `--tls-ca "gone.pem": cannot be read`},
		{map[string]string{"SWITCHBOARD_TRANSPORT_TLS_CA": "junk.pem"}, send, `SWITCHBOARD_TRANSPORT_TLS_CA "junk.pem": holds no PEM certificate`},
		{nil, with(send, "--config", "transport.toml"), `config transport.toml: transport.tls_ca "gone.pem": cannot be read`},
	} {
		checkUsage(t, tc.env, tc.args, tc.want)
	}
	// A path longer than the 80 bytes an error shows of a value is given
	// whole in the reason: its file's name is at its end.
	long := filepath.Join(dir, strings.Repeat("mounted-secret-volume/", 4), "tls.crt")
	_, err := loadKeyPair(tlsFile{"http.tls_cert", long}, tlsFile{"http.tls_key", "a-key.pem"})
	if err == nil || !strings.Contains(err.Error(), "(file "+long+")") {
		t.Errorf("a long missing path: %v; want the whole path", err)
	}
	// Good files still load.
	if _, err := loadKeyPair(tlsFile{"http.tls_cert", "a.pem"}, tlsFile{"http.tls_key", "a-key.pem"}); err != nil {
		t.Fatalf("a.pem and a-key.pem: %v", err)
	}
	if err := checkCA(tlsFile{"transport.tls_ca", "ca.pem"}); err != nil {
		t.Fatalf("ca.pem: %v", err)
	}
}

// TestServeDSNErrorNamesItsSource: serve refuses a server DSN, naming where
// it came from: the flag, the environment variable or the config file.
func TestServeDSNErrorNamesItsSource(t *testing.T) {
	dir := cleanEnv(t)
	testkit.WriteFile(t, dir, "sb.toml", []byte("[discovery]\ndsn = \"https://127.0.0.1:1\"\n"))
	const reason = ": serve needs a database backend"
	checkUsage(t, nil, []string{"serve", "--dsn", "http://127.0.0.1:1"}, `--dsn "http://127.0.0.1:1"`+reason)
	checkUsage(t, map[string]string{envDSN: "http://127.0.0.1:1"}, []string{"serve"}, envDSN+` "http://127.0.0.1:1"`+reason)
	checkUsage(t, nil, []string{"serve", "--config", "sb.toml"}, `config sb.toml: discovery.dsn "https://127.0.0.1:1"`+reason)
}

// TestDeriveHeartbeatReadsTheLoadedEnvironment: whether a heartbeat was
// set in the environment is read from the environment the configuration is
// loaded from (here an injected one), not from the process's.
func TestDeriveHeartbeatReadsTheLoadedEnvironment(t *testing.T) {
	cleanEnv(t)
	// The process says a heartbeat was set; the configuration's
	// environment says not: it is derived from the ttl.
	t.Setenv(envHeartbeat, "3s")
	g := &globals{getenv: func(k string) string { return map[string]string{envTTL: "1s"}[k] }}
	c, err := g.config()
	if err != nil || c.Discovery.HeartbeatInterval != switchboard.HeartbeatFor(time.Second) {
		t.Fatalf("heartbeat %s, %v; want %s derived from the injected ttl (1s)", c.Discovery.HeartbeatInterval, err, switchboard.HeartbeatFor(time.Second))
	}
	// The configuration's environment sets a heartbeat: it is kept, and
	// named when it does not fit the ttl.
	t.Setenv(envHeartbeat, "")
	g.getenv = func(k string) string { return map[string]string{envTTL: "1s", envHeartbeat: "3s"}[k] }
	if _, err := g.config(); err == nil || !strings.HasPrefix(err.Error(), envHeartbeat+` "3s": must be at most half the ttl`) {
		t.Fatalf("g.config() = %v; want an error on %s", err, envHeartbeat)
	}
	g.getenv = func(k string) string { return map[string]string{envTTL: "1s", envHeartbeat: "200ms"}[k] }
	if c, err := g.config(); err != nil || c.Discovery.HeartbeatInterval != 200*time.Millisecond {
		t.Fatalf("heartbeat %s, %v; want the injected 200ms", c.Discovery.HeartbeatInterval, err)
	}
}
