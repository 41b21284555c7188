package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func uniqueModule(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// waitOutput reads lines of p until one contains substr.
func waitOutput(t *testing.T, p *proc, substr string) string {
	t.Helper()
	for {
		if l := p.line(t); strings.Contains(l, substr) {
			return l
		}
	}
}

// TestEchoAndSendOverNATS: `switchboard nats` runs a broker; with
// TINY_NATS_URL set, echo serves on NATS and registers its nats:// address,
// and send reaches it over NATS. A gRPC echo in the same catalog is still
// reached over gRPC (mixed fleet).
func TestEchoAndSendOverNATS(t *testing.T) {
	dsn, _ := dsnIn(t)
	addr := freeAddr(t)
	broker := start(t, "nats", "--listen", addr, "--data", filepath.Join(t.TempDir(), "nats"))
	waitOutput(t, broker, "serving nats://"+addr)

	t.Setenv("TINY_NATS_URL", "nats://"+addr)
	echo := start(t, "echo", "--dsn", dsn, "--name", "NATS_Echo", "--log-level", "info")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	if in.Name != "nats-echo" || in.Address != "nats://tinymodule.nats-echo.msg" {
		t.Fatalf("echo registered %+v", in)
	}
	code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", "flow1.nats-echo.node-a:in", "--data", "hello over nats")
	if code != 0 || stdout != "hello over nats\n" {
		t.Fatalf("send: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	// A gRPC module in the same catalog: send picks gRPC for it.
	t.Setenv("TINY_NATS_URL", "")
	grpcEcho := start(t, "echo", "--dsn", dsn, "--name", "grpc-echo")
	var grpcIn switchboard.Instance
	if err := json.Unmarshal([]byte(grpcEcho.line(t)), &grpcIn); err != nil {
		t.Fatal(err)
	}
	// Both wires register the binary's version.
	if in.Version == "" || in.Version != grpcIn.Version {
		t.Fatalf("version over NATS %q, over gRPC %q: want the binary's on both", in.Version, grpcIn.Version)
	}
	t.Setenv("TINY_NATS_URL", "nats://"+addr)
	code, stdout, stderr = cli(t, "send", "--dsn", dsn, "--to", "flow1.grpc-echo.n:in", "--data", "over grpc")
	if code != 0 || stdout != "over grpc\n" {
		t.Fatalf("send to the gRPC module: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}
	if !strings.Contains(echo.stderr.String(), "transport: core req/reply") {
		t.Fatalf("the startup log does not name the wire: %s", echo.stderr)
	}
	code, stdout, _ = cli(t, "ls", "--dsn", dsn, "--name", "nats-echo")
	if code != 0 || strings.Contains(stdout, "nats-echo") {
		t.Fatalf("echo left its row behind: %q", stdout)
	}
}

// TestSendReachesNATSModuleWithoutNATSDefault: the local default is gRPC
// (no TINY_NATS_URL), yet a module advertised at nats://… is reached over
// NATS (the local broker, here this machine's on 4222).
func TestSendReachesNATSModuleWithoutNATSDefault(t *testing.T) {
	dsn, _ := dsnIn(t)
	module := uniqueModule("sbcli")
	t.Setenv("TINY_NATS_URL", "nats://127.0.0.1:4222")
	echo := start(t, "echo", "--dsn", dsn, "--name", module)
	echo.line(t)
	t.Setenv("TINY_NATS_URL", "")
	code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", "f."+module+".n:in", "--data", "found by address")
	if code != 0 || stdout != "found by address\n" {
		t.Fatalf("send: code %d stdout %q stderr %q", code, stdout, stderr)
	}
}

// TestEchoFallsBackToGRPC: a NATS URL nobody answers at start → the gRPC
// wire, logged.
func TestEchoFallsBackToGRPC(t *testing.T) {
	dsn, _ := dsnIn(t)
	t.Setenv("TINY_NATS_URL", "nats://"+freeAddr(t))
	echo := start(t, "echo", "--dsn", dsn, "--name", "fallback-echo")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(in.Address, "127.0.0.1:") {
		t.Fatalf("echo registered %+v, want a gRPC address", in)
	}
	// The log line was written before the registration was printed, but
	// the test reads stderr through a goroutine of its own: wait for it.
	testkit.WaitUntil(t, "the fallback logged", func() bool {
		return strings.Contains(echo.stderr.String(), "transport: gRPC fallback")
	})
}

// TestServeNATSDemo: `serve --nats --demo` runs the broker and two demo
// modules that talk over it.
func TestServeNATSDemo(t *testing.T) {
	dsn, _ := dsnIn(t)
	addr := freeAddr(t)
	srv := start(t, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--nats="+addr, "--demo")
	waitOutput(t, srv, "demo modules")
	t.Setenv("TINY_NATS_URL", "nats://"+addr)
	code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", "demo.demo-relay.n:in", "--data", "hi")
	if code != 0 || stdout != "relayed: hi\n" {
		t.Fatalf("send: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v; stderr %s", err, srv.stderr)
	}
}

// TestEchoAndSendOverJetStream: TINY_NATS_TRANSPORT=jetstream selects the
// durable wire on both sides, and the startup log says so.
func TestEchoAndSendOverJetStream(t *testing.T) {
	dsn, _ := dsnIn(t)
	addr := freeAddr(t)
	broker := start(t, "nats", "--listen", addr, "--data", filepath.Join(t.TempDir(), "nats"))
	waitOutput(t, broker, "serving nats://"+addr)
	t.Setenv("TINY_NATS_URL", "nats://"+addr)
	t.Setenv("TINY_NATS_TRANSPORT", "jetstream")
	echo := start(t, "echo", "--dsn", dsn, "--name", "js-echo", "--log-level", "info")
	echo.line(t)
	code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", "flow1.js-echo.n:in", "--data", "durable hello")
	if code != 0 || stdout != "durable hello\n" {
		t.Fatalf("send: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}
	if !strings.Contains(echo.stderr.String(), "transport: jetstream-backed durable wire") {
		t.Fatalf("the startup log does not name the wire: %s", echo.stderr)
	}
}
