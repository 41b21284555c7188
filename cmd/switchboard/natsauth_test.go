//go:build !nonats

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/switchboard-io/switchboard"
)

// TestNATSCredentialsOnTheCLI: against a broker that requires a user and
// password, echo (credentials from the environment) and send (--nats-user,
// the password from the environment) talk over NATS; a wrong password is
// refused without being shown; a credentials file that does not exist is
// a usage error (exit 2) naming the flag and the file, before any
// connection.
func TestNATSCredentialsOnTheCLI(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "alice", Password: "cli-secret-pw"}}})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("broker not ready")
	}
	dsn, _ := dsnIn(t)
	t.Setenv("TINY_NATS_URL", ns.ClientURL())
	t.Setenv("SWITCHBOARD_NATS_USER", "alice")
	t.Setenv("SWITCHBOARD_NATS_PASSWORD", "cli-secret-pw")
	echo := start(t, "echo", "--dsn", dsn, "--name", "secured-echo", "--log-level", "info")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatalf("echo: %v; stderr %s", err, echo.stderr)
	}
	if in.Address != "nats://tinymodule.secured-echo.msg" {
		t.Fatalf("echo registered %+v", in)
	}

	t.Setenv("SWITCHBOARD_NATS_USER", "")
	code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--nats-user", "alice", "--to", "f.secured-echo.n:in", "--data", "hi")
	if code != 0 || stdout != "hi\n" {
		t.Fatalf("send: code %d stdout %q stderr %q", code, stdout, stderr)
	}

	t.Setenv("SWITCHBOARD_NATS_PASSWORD", "wrong-cli-pw")
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--nats-user", "alice", "--to", "f.secured-echo.n:in", "--data", "hi")
	if code == 0 || !strings.Contains(stderr, "refused the credentials") || !strings.Contains(stderr, `user "alice"`) || strings.Contains(stderr, "wrong-cli-pw") {
		t.Fatalf("wrong password: code %d stderr %q", code, stderr)
	}

	missing := filepath.Join(t.TempDir(), "absent.creds")
	t.Setenv("SWITCHBOARD_NATS_PASSWORD", "")
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--nats-creds", missing, "--to", "f.secured-echo.n:in", "--data", "hi")
	if code != 2 || !strings.Contains(stderr, "--nats-creds") || !strings.Contains(stderr, missing) {
		t.Fatalf("missing creds file: code %d stderr %q", code, stderr)
	}
	garbage := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SWITCHBOARD_NATS_TLS_CA", garbage)
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--to", "f.secured-echo.n:in", "--data", "hi")
	if code != 2 || !strings.Contains(stderr, "SWITCHBOARD_NATS_TLS_CA") || !strings.Contains(stderr, "no PEM certificate") {
		t.Fatalf("CA file without a certificate: code %d stderr %q", code, stderr)
	}

	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}
	if s := echo.stderr.String(); !strings.Contains(s, "server=") || strings.Contains(s, "cli-secret-pw") {
		t.Fatalf("echo's log does not name the server, or shows the password: %s", s)
	}
}
