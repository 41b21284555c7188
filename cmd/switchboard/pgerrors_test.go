package main

import (
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// The CLI over a real PostgreSQL tells a server that answered from one it
// could not reach, in one line: a missing database exits 1 with the
// command that creates it; a misspelt parameter exits 2 (the DSN is wrong)
// and is said once, with the parameter meant.
func TestCLIPostgresAnswers(t *testing.T) {
	u, err := url.Parse(pgtest.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(u.Host)
	missing := *u
	missing.Path = "/nosuchdb"
	misspelt := *u
	q := misspelt.Query()
	q.Del("sslmode")
	q.Set("sslmod", "disable")
	misspelt.RawQuery = q.Encode()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ls", "--dsn", missing.String()}, 1, fmt.Sprintf(
			"switchboard: postgres: database \"nosuchdb\" does not exist on %s (the server answered): create it (createdb -h %s -p %s -U %s nosuchdb) or name an existing database in the DSN\n",
			u.Host, host, port, u.User.Username())},
		{[]string{"ls", "--dsn", misspelt.String()}, 2, fmt.Sprintf(
			"switchboard: postgres: the server at %s does not know the DSN's parameter \"sslmod\" (did you mean \"sslmode\"?): a parameter the driver does not know is sent to the server as a setting, and it refused this one; run 'switchboard ls --help'\n",
			u.Host)},
	} {
		code, stdout, stderr := cli(t, tc.args...)
		if code != tc.code || stdout != "" || stderr != tc.want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n %q\nwant exit %d and\n %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}

// A server that accepts and never answers makes ls fail within the
// connect timeout with one line, exit 1, instead of waiting in silence.
func TestCLIPostgresNoAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for c := range held {
			c.Close()
		}
	})
	addr := l.Addr().String()
	code, stdout, stderr := cli(t, "ls", "--dsn", "postgres://postgres@"+addr+"/test?connect_timeout=1")
	want := "switchboard: postgres: cannot reach the catalog at " + addr + "/test: the server accepted the connection but did not answer within 1s (is it PostgreSQL, and not stopped or overloaded? connect_timeout=SECONDS in the DSN waits longer)\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr\n %q\nwant exit 1 and\n %q", code, stdout, stderr, want)
	}
}
