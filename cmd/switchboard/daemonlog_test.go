package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard/internal/testkit"
)

// Commands that run until stopped log at info by default, and their start
// says where they are: the catalog, the address and the wire. One-shot
// commands stay quiet; --log-level still decides when given.
func TestDaemonsSayWhereTheyAre(t *testing.T) {
	dsn, _ := dsnIn(t)

	echo := start(t, "echo", "--dsn", dsn, "--name", "where-echo")
	echo.line(t)
	grpcLine := regexp.MustCompile(`level=INFO msg="transport: gRPC" module=where-echo listen=127\.0\.0\.1:\d+ tls=false catalog=` + regexp.QuoteMeta(dsn) + ` id=`)
	testkit.WaitUntil(t, "echo's start line", func() bool { return grpcLine.MatchString(echo.stderr.String()) })
	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}

	srv, url := serveProc(t, "--dsn", dsn)
	serveLine := `level=INFO msg="serve: listening" url=` + url + ` catalog=` + dsn + ` transport="HTTP API, SSE watch"`
	testkit.WaitUntil(t, "serve's start line", func() bool { return strings.Contains(srv.stderr.String(), serveLine) })
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v; stderr %s", err, srv.stderr)
	}

	quiet := start(t, "echo", "--dsn", dsn, "--name", "quiet-echo", "--log-level", "warn")
	quiet.line(t)
	quiet.cmd.Process.Signal(syscall.SIGTERM)
	if err := quiet.wait(t); err != nil || quiet.stderr.String() != "" {
		t.Fatalf("echo --log-level warn: exit %v, stderr %q", err, quiet.stderr)
	}

	// One-shot commands say nothing on stderr when all goes well.
	for _, args := range [][]string{{"ls", "--dsn", dsn}, {"ls", "--dsn", dsn, "--all", "-o", "json"}, {"reap", "--dsn", dsn}} {
		code, _, stderr := cli(t, args...)
		if code != 0 || (stderr != "" && stderr != "no instances found\n") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
