package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestConfigFileTokenReachesServer: one switchboard.toml holds the
// server's DSN and [http] token; `serve` requires the token, and the client
// commands reading the same file send it (no SWITCHBOARD_HTTP_TOKEN set).
// The environment variable still wins over the file.
func TestConfigFileTokenReachesServer(t *testing.T) {
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "")
	dsn, _ := dsnIn(t)
	dir := t.TempDir()
	serverFile := filepath.Join(dir, "server.toml")
	os.WriteFile(serverFile, []byte("[discovery]\ndsn = \""+dsn+"\"\n[http]\ntoken = \"file-token\"\n"), 0o600)
	_, url := serveProc(t, "--config", serverFile)
	clientFile := filepath.Join(dir, "client.toml")
	os.WriteFile(clientFile, []byte("[discovery]\ndsn = \""+url+"\"\n[http]\ntoken = \"file-token\"\n"), 0o600)
	if code, stdout, stderr := cli(t, "ls", "--config", clientFile, "--json"); code != 0 || stdout != "[]\n" {
		t.Fatalf("ls with the file's token: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	p := start(t, "register", "--config", clientFile, "--name", "tok", "--type", "w", "--address", "127.0.0.1:1")
	p.line(t)
	if code, stdout, stderr := cli(t, "ls", "--config", clientFile); code != 0 || !strings.Contains(stdout, "tok") {
		t.Fatalf("ls after register with the file's token: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "env-token")
	if code, _, stderr := cli(t, "ls", "--config", clientFile); code != 1 || !strings.Contains(stderr, "wrong API token") {
		t.Fatalf("the environment's token should win over the file's: exit %d stderr %q", code, stderr)
	}
}

// TestRequestTimeout: the request timeout of a server DSN comes from
// --request-timeout, SWITCHBOARD_HTTP_REQUEST_TIMEOUT or [http]
// request_timeout (the flag wins), and reaches the remote catalog: a server
// that accepts a request but never answers fails it with an error naming
// that timeout. A timeout that is not positive is an error naming where it
// came from.
func TestRequestTimeout(t *testing.T) {
	dir := cleanEnv(t)
	stuck := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stuck:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stuck) }) // first: Close waits for the handlers
	testkit.WriteFile(t, dir, "sb.toml", []byte("[discovery]\ndsn = \""+srv.URL+"\"\n[http]\nrequest_timeout = \"150ms\"\n"))
	testkit.WriteFile(t, dir, "zero.toml", []byte("[http]\nrequest_timeout = \"0s\"\n"))
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"ls", "--config", "sb.toml"}, "within 150ms"},
		{"250ms", []string{"ls", "--config", "sb.toml"}, "within 250ms"},
		{"250ms", []string{"ls", "--config", "sb.toml", "--request-timeout", "200ms"}, "within 200ms"},
	} {
		t.Setenv("SWITCHBOARD_HTTP_REQUEST_TIMEOUT", tc.env)
		code, stdout, stderr := cli(t, tc.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, srv.URL) {
			t.Errorf("SWITCHBOARD_HTTP_REQUEST_TIMEOUT=%q %v: exit %d stdout %q stderr %q; want exit 1 and %q", tc.env, tc.args, code, stdout, stderr, tc.want)
		}
	}
	const positive = `: must be positive`
	checkUsage(t, nil, []string{"ls", "--dsn", srv.URL, "--request-timeout", "0s"}, `--request-timeout "0s"`+positive)
	checkUsage(t, nil, []string{"ls", "--dsn", srv.URL, "--request-timeout=-1s"}, `--request-timeout "-1s"`+positive)
	checkUsage(t, map[string]string{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "0"}, []string{"ls", "--dsn", srv.URL}, `SWITCHBOARD_HTTP_REQUEST_TIMEOUT "0"`+positive)
	checkUsage(t, nil, []string{"ls", "--dsn", srv.URL, "--config", "zero.toml"}, `config zero.toml: http.request_timeout "0s"`+positive)
	checkUsage(t, nil, []string{"ls", "--dsn", srv.URL, "--request-timeout", "soon"}, `invalid argument "soon" for "--request-timeout" flag`)
}

// TestServeIgnoresRequestTimeout: [http] request_timeout bounds a client's
// requests to a server. serve and nats, which are no clients, start however
// wrong it is (here in the file, the environment and the flag at once: any
// one of them read would stop them), while every command that can be a
// client refuses each of them, named as the user set it.
func TestServeIgnoresRequestTimeout(t *testing.T) {
	dir := cleanEnv(t)
	dsn, _ := dsnIn(t)
	file := testkit.WriteFile(t, dir, "sb.toml", []byte("[http]\nrequest_timeout = \"soon\"\n"))
	t.Setenv("SWITCHBOARD_HTTP_REQUEST_TIMEOUT", "0")
	_, url := serveProc(t, "--dsn", dsn, "--config", file, "--request-timeout=-1s")
	t.Setenv("SWITCHBOARD_HTTP_REQUEST_TIMEOUT", "")
	if code, stdout, stderr := cli(t, "ls", "--dsn", url, "--json"); code != 0 || stdout != "[]\n" {
		t.Fatalf("ls through the server: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	// nats runs a broker, no client of a server either.
	t.Setenv("SWITCHBOARD_HTTP_REQUEST_TIMEOUT", "0")
	addr := freeAddr(t)
	broker := start(t, "nats", "--config", file, "--request-timeout=-1s", "--listen", addr, "--data", filepath.Join(t.TempDir(), "nats"))
	waitOutput(t, broker, "serving nats://"+addr)
	runArgs := flagRunArgs(t)
	for _, name := range []string{"ls", "watch", "register", "deregister", "reap", "leases", "echo", "send", "demo", "backup"} {
		args := append([]string{name, "--dsn", url}, runArgs[name]...)
		with := func(more ...string) []string { return append(slices.Clone(args), more...) }
		checkUsage(t, map[string]string{"SWITCHBOARD_HTTP_REQUEST_TIMEOUT": "0"}, args, `SWITCHBOARD_HTTP_REQUEST_TIMEOUT "0": must be positive`)
		checkUsage(t, nil, with("--config", file), `config `+file+`: http.request_timeout "soon": not a duration`)
		checkUsage(t, nil, with("--request-timeout=-1s"), `--request-timeout "-1s": must be positive`)
	}
}
