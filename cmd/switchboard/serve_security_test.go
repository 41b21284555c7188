package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestServeTokenFilesAdminAndTLSSuites: serve reads its tokens from files
// (they are in no process's command line), clients read theirs from
// SWITCHBOARD_HTTP_TOKEN_FILE; the client token cannot reap live rows,
// the admin token can; TLS 1.2 is offered with AEAD suites only.
func TestServeTokenFilesAdminAndTLSSuites(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	const clientTok, adminTok = "client-token-from-file-0123", "admin-token-from-file-0123"
	tokFile, admFile := filepath.Join(dir, "token"), filepath.Join(dir, "admin")
	os.WriteFile(tokFile, []byte(clientTok+"\n"), 0o600)
	os.WriteFile(admFile, []byte(adminTok+"\n"), 0o600)
	dsn, _ := dsnIn(t)
	srv, url := serveProc(t, "--dsn", dsn, "--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokFile, "--admin-token-file", admFile)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", srv.cmd.Process.Pid))
	if strings.Contains(string(cmdline), clientTok) || strings.Contains(string(cmdline), adminTok) {
		t.Fatalf("a token is in serve's command line: %q", cmdline)
	}
	t.Setenv("SWITCHBOARD_HTTP_CA", certFile)
	if code, _, stderr := cli(t, "ls", "--dsn", url); code != 1 || !strings.Contains(stderr, "missing API token") {
		t.Fatalf("ls without a token: %d %q", code, stderr)
	}
	t.Setenv("SWITCHBOARD_HTTP_TOKEN_FILE", tokFile)
	reg := start(t, "register", "--dsn", url, "--name", "live", "--type", "querier", "--address", "127.0.0.1:7001", "--id", "live-1")
	reg.line(t)
	code, _, stderr := cli(t, "reap", "--dsn", url, "--older-than", "1ms")
	if code != 1 || !strings.Contains(stderr, "admin token") {
		t.Fatalf("reap of live rows with the client token: %d %q", code, stderr)
	}
	if code, stdout, _ := cli(t, "ls", "--dsn", url, "--json"); code != 0 || !strings.Contains(stdout, `"live-1"`) {
		t.Fatalf("the live row after a refused reap: %d %s", code, stdout)
	}
	os.Unsetenv("SWITCHBOARD_HTTP_TOKEN_FILE")
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", adminTok)
	if code, stdout, stderr := cli(t, "reap", "--dsn", url, "--older-than", "1ms"); code != 0 {
		t.Fatalf("reap with the admin token: %d %q %q", code, stdout, stderr)
	}

	pemBytes, _ := os.ReadFile(certFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	addr := strings.TrimPrefix(url, "https://")
	for _, tc := range []struct {
		suite uint16
		ok    bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
	} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tc.suite}})
		if err == nil {
			conn.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("TLS 1.2 with %s: %v; want accepted %v", tls.CipherSuiteName(tc.suite), err, tc.ok)
		}
	}
	reg.cmd.Process.Signal(syscall.SIGTERM)
	reg.wait(t)
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, srv.stderr)
	}
}

// TestServeWarnsWithoutTokenBeyondLoopback: serve listening on every
// interface without a token says loudly, at start, that anyone who reaches
// it may write; on loopback it does not.
func TestServeWarnsWithoutTokenBeyondLoopback(t *testing.T) {
	dsn, _ := dsnIn(t)
	open := start(t, "serve", "--dsn", dsn, "--listen", "0.0.0.0:0")
	open.line(t)
	testkit.WaitUntil(t, "the warning", func() bool { return strings.Contains(open.stderr.String(), "WITHOUT A TOKEN") })
	loop, _ := serveProc(t, "--dsn", dsn)
	loop.line(t) // the dashboard line; the warning would come before the first
	if strings.Contains(loop.stderr.String(), "WITHOUT A TOKEN") {
		t.Fatalf("serve on loopback warned: %s", loop.stderr)
	}
	for _, p := range []*proc{open, loop} {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
	}
}

// TestServeTokensFileAndPerTokenQuota: serve takes more client tokens
// from --tokens-file and its per-token quota from the environment: one
// tenant at its quota of instances is answered 429 naming the quota while
// another still registers; a request without a token is refused.
func TestServeTokensFileAndPerTokenQuota(t *testing.T) {
	dir := t.TempDir()
	const tenantA, tenantB = "tenant-a-token-0123456789", "tenant-b-token-0123456789"
	toksFile := filepath.Join(dir, "tokens")
	os.WriteFile(toksFile, []byte("# one a line\n"+tenantA+"\n"+tenantB+"\n"), 0o600)
	t.Setenv("SWITCHBOARD_HTTP_MAX_INSTANCES_PER_TOKEN", "1")
	dsn, _ := dsnIn(t)
	srv, url := serveProc(t, "--dsn", dsn, "--tokens-file", toksFile)
	put := func(tok, name string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", url+"/v1/instances", strings.NewReader(`{"name":"`+name+`","type":"querier","address":"127.0.0.1:7001"}`))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := put(tenantA, "a1"); code != 200 {
		t.Fatalf("tenant A's first: %d %s", code, body)
	}
	if code, body := put(tenantA, "a2"); code != 429 || !strings.Contains(body, `"quota":"max_instances_per_token"`) || !strings.Contains(body, `"limit":1`) {
		t.Fatalf("tenant A past its quota: %d %s", code, body)
	}
	if code, body := put(tenantB, "b1"); code != 200 {
		t.Fatalf("tenant B: %d %s", code, body)
	}
	if code, body := put("", "anon"); code != 401 {
		t.Fatalf("no token: %d %s", code, body)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, srv.stderr)
	}
}
