package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/checks"
)

// TestRegisterCheck: register --check without --ttl stores the check,
// marks the row check-only, prints it and exits at once; bad checks and a
// target the policy refuses exit 2 and store nothing; through a serve that
// runs checks, a reachable target turns the row passing.
func TestRegisterCheck(t *testing.T) {
	dsn, _ := dsnIn(t)
	for _, bad := range [][]string{
		{"--check", "ftp://127.0.0.1:1"},
		{"--check", "tcp://127.0.0.1"},
		{"--check", "tcp://127.0.0.1:1", "--check-interval", "0s"},
		{"--check", "tcp://127.0.0.1:1", "--check-timeout", "20s"},
		{"--check", "tcp://10.1.2.3:5432"},
	} {
		code, _, stderr := cli(t, append([]string{"register", "--dsn", dsn, "--name", "db", "--type", "postgres", "--address", "127.0.0.1:5432"}, bad...)...)
		if code != 2 || !strings.Contains(stderr, "--check") {
			t.Errorf("%v: exit %d, stderr %q", bad, code, stderr)
		}
	}
	// Nothing stored: ls finds no catalog at all (as now: the refusals came
	// before the file was made), or an empty one.
	if code, out, stderr := cli(t, "ls", "--dsn", dsn, "--all", "--json"); (code != 0 || out != "[]\n") && !strings.Contains(stderr, "no catalog at") {
		t.Fatalf("a refused registration stored something: exit %d, %q, %q", code, out, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, url := serveProc(t, "--dsn", dsn)
	code, out, stderr := cli(t, "register", "--dsn", url, "--name", "db", "--type", "postgres", "--address", ln.Addr().String(),
		"--check", "tcp://"+ln.Addr().String(), "--check-interval", "1s")
	var in switchboard.Instance
	if code != 0 || json.Unmarshal([]byte(out), &in) != nil {
		t.Fatalf("register --check: exit %d %q %q", code, out, stderr)
	}
	if in.Check == nil || in.Metadata[checks.MetadataCheckOnly] != "true" || in.Health.Status != switchboard.StatusCritical {
		t.Fatalf("stored %+v", in)
	}
	waitUntil(t, "the server's runner judges the check passing", func() bool {
		code, out, _ := cli(t, "ls", "--dsn", url, "--json")
		var list []switchboard.Instance
		return code == 0 && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && list[0].Health.Status == switchboard.StatusPassing
	})
}
