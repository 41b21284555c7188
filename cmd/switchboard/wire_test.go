package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestEchoAndSendOverMutualTLS: echo serves with --tls-*, send reaches it
// with its own client certificate, and a send without TLS fails at once
// with a clear, non-retried error.
func TestEchoAndSendOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite://" + filepath.Join(dir, "c.db")
	ca := testkit.NewCA(t, "cli test CA")
	srv, cli1 := ca.IssueValid(t, "echo"), ca.IssueValid(t, "send")
	caFile := testkit.WriteFile(t, dir, "ca.pem", ca.PEM)
	echo := start(t, "echo", "--dsn", dsn, "--name", "secure-echo",
		"--tls-cert", testkit.WriteFile(t, dir, "srv.pem", srv.CertPEM),
		"--tls-key", testkit.WriteFile(t, dir, "srv-key.pem", srv.KeyPEM), "--tls-ca", caFile)
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	clientFlags := []string{"--tls-cert", testkit.WriteFile(t, dir, "cli.pem", cli1.CertPEM),
		"--tls-key", testkit.WriteFile(t, dir, "cli-key.pem", cli1.KeyPEM), "--tls-ca", caFile}
	code, stdout, stderr := cli(t, append([]string{"send", "--dsn", dsn, "--to", "f.secure-echo.n:in", "--data", "over mTLS"}, clientFlags...)...)
	if code != 0 || stdout != "over mTLS\n" {
		t.Fatalf("mTLS send: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--to", "f.secure-echo.n:in", "--data", "x", "--edge-retry", "3")
	if code != 1 || !strings.Contains(stderr, "code tls_failed, retryable false") || strings.Contains(stderr, "attempts") {
		t.Fatalf("plaintext send to a TLS module: exit %d stderr %q", code, stderr)
	}
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--to", "f.secure-echo.n:in", "--data", "x", "--tls-cert", filepath.Join(dir, "cli.pem"))
	if code != 2 || !strings.Contains(stderr, "tls_key") {
		t.Fatalf("--tls-cert without --tls-key: exit %d stderr %q", code, stderr)
	}
	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}
}
