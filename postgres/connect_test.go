package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-io/switchboard"
)

// serverOf is the host:port and user of the test server's DSN.
func serverOf(t *testing.T) (u *url.URL, server, user string) {
	t.Helper()
	u, err := url.Parse(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	return u, u.Host, u.User.Username()
}

// A database that does not exist is the server's answer, not an
// unreachable server: one line that names it and the command creating it,
// wrapping ErrNoCatalog (not ErrUnreachable).
func TestOpenMissingDatabase(t *testing.T) {
	u, server, user := serverOf(t)
	u.Path = "/nosuchdb_switchboard"
	host, port, _ := net.SplitHostPort(server)
	for _, opts := range []switchboard.Options{{}, {MustExist: true}} {
		err := openErr(u.String(), opts)
		want := fmt.Sprintf(`postgres: database "nosuchdb_switchboard" does not exist on %s (the server answered): create it (createdb -h %s -p %s -U %s nosuchdb_switchboard) or name an existing database in the DSN`,
			server, host, port, user)
		if err == nil || err.Error() != want {
			t.Fatalf("MustExist %v:\n got %v\nwant %s", opts.MustExist, err, want)
		}
		if !errors.Is(err, switchboard.ErrNoCatalog) || errors.Is(err, switchboard.ErrUnreachable) {
			t.Fatalf("MustExist %v: %v is not ErrNoCatalog alone", opts.MustExist, err)
		}
	}
}

// A misspelt parameter reaches the server as a setting, which refuses it:
// said once (the driver's two attempts, with TLS and without, failed
// alike), with the parameter meant, as invalid input.
func TestOpenUnknownParameter(t *testing.T) {
	u, server, _ := serverOf(t)
	for _, tc := range []struct{ param, want string }{
		{"sslmod", fmt.Sprintf(`postgres: the server at %s does not know the DSN's parameter "sslmod" (did you mean "sslmode"?): a parameter the driver does not know is sent to the server as a setting, and it refused this one`, server)},
		{"zzqqxx", fmt.Sprintf(`postgres: the server at %s does not know the DSN's parameter "zzqqxx": a parameter the driver does not know is sent to the server as a setting, and it refused this one`, server)},
	} {
		v := *u
		q := v.Query()
		q.Del("sslmode") // the driver then tries TLS first, then without
		q.Set(tc.param, "disable")
		v.RawQuery = q.Encode()
		err := openErr(v.String(), switchboard.Options{})
		if err == nil || err.Error() != tc.want {
			t.Fatalf("%s:\n got %v\nwant %s", tc.param, err, tc.want)
		}
		if !errors.Is(err, switchboard.ErrInvalidDSN) || errors.Is(err, switchboard.ErrUnreachable) {
			t.Fatalf("%s: %v is not ErrInvalidDSN alone", tc.param, err)
		}
	}
}

// silentServer accepts connections and never answers; it is closed when
// t ends.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// A server that accepts connections and never answers fails Open within
// the connect timeout (the DSN's connect_timeout, else
// DefaultConnectTimeout) with one line that says so, as ErrUnreachable;
// Open's own context is not what ends it.
func TestOpenNoAnswer(t *testing.T) {
	addr := silentServer(t)
	for _, tc := range []struct {
		query   string
		timeout time.Duration
	}{
		{"?connect_timeout=1", time.Second},
		{"?connect_timeout=1&sslmode=disable", time.Second},
		{"?sslmode=disable", DefaultConnectTimeout},
	} {
		dsn := "postgres://postgres:s3cr3t@" + addr + "/test" + tc.query
		d, err := switchboard.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		c, err := Open(ctx, d, switchboard.Options{Logger: quietLogger()})
		ctxErr := ctx.Err()
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("%s: Open succeeded on a server that never answers", tc.query)
		}
		want := fmt.Sprintf("postgres: cannot reach the catalog at %s/test: the server accepted the connection but did not answer within %s (is it PostgreSQL, and not stopped or overloaded? connect_timeout=SECONDS in the DSN waits longer)", addr, tc.timeout)
		if ctxErr != nil || err.Error() != want || !errors.Is(err, switchboard.ErrUnreachable) || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("%s (Open's context: %v):\n got %v\nwant %s", tc.query, ctxErr, err, want)
		}
	}
}

// connectTimeout sets the default only where neither the DSN nor the
// environment sets one; connect_timeout=0 (wait without bound) is kept.
func TestConnectTimeout(t *testing.T) {
	for _, tc := range []struct {
		dsn  string
		env  string // PGCONNECT_TIMEOUT, when not ""
		want time.Duration
	}{
		{"postgres://u@h/db", "", DefaultConnectTimeout},
		{"postgres://u@h/db?connect_timeout=7", "", 7 * time.Second},
		{"postgres://u@h/db?connect_timeout=0", "", 0},
		{"Postgres://u@h/db?sslmode=disable&connect_timeout=2", "", 2 * time.Second},
		{"postgres://u@h/db", "9", 9 * time.Second},
		{"postgres://u@h/db", "0", 0},
	} {
		t.Run(tc.dsn+" "+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("PGCONNECT_TIMEOUT", tc.env)
			}
			cfg, err := pgxpool.ParseConfig(connString(tc.dsn))
			if err != nil {
				t.Fatal(err)
			}
			if got := connectTimeout(tc.dsn, cfg); got != tc.want || cfg.ConnConfig.ConnectTimeout != tc.want {
				t.Fatalf("connectTimeout = %s, config %s; want %s", got, cfg.ConnConfig.ConnectTimeout, tc.want)
			}
		})
	}
}
