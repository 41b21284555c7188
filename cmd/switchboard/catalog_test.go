package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// withPassword returns a PostgreSQL DSN of this machine's server (trust
// authentication: any password is accepted) carrying the password s3cr3t.
func withPassword(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, drop, err := pgtest.NewDatabase(ctx)
	if err != nil {
		t.Fatalf("PostgreSQL (start it with .ci/run or pg_ctlcluster): %v", err)
	}
	t.Cleanup(drop)
	user, rest, ok := strings.Cut(strings.TrimPrefix(dsn, "postgres://"), "@")
	if !ok {
		t.Fatalf("unexpected test DSN %q", dsn)
	}
	return "postgres://" + strings.SplitN(user, ":", 2)[0] + ":s3cr3t@" + rest
}

// A PostgreSQL DSN's password appears in no error and no log line of the
// CLI (issue 7 item 11).
func TestCLIRedactsPasswords(t *testing.T) {
	dsn := withPassword(t)
	unreachable := "postgres://postgres:s3cr3t@127.0.0.1:1/test?connect_timeout=2"
	for _, args := range [][]string{
		{"deregister", "--dsn", dsn, "nope"},
		{"ls", "--dsn", unreachable, "--log-level", "debug"},
		{"ls", "--dsn", "postgres://postgres:s3cr3t@:5432/test"},
		{"ls", "--dsn", dsn + "&pool_max_conns=x"},
	} {
		code, stdout, stderr := cli(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if strings.Contains(stdout+stderr, "s3cr3t") {
			t.Errorf("%v: the password is shown:\n%s%s", args, stdout, stderr)
		}
	}
}
