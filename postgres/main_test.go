package postgres

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// testDSN is the throwaway database of this test binary.
var testDSN string

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &testDSN)) }

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// openDSN opens a catalog on dsn, closed when t ends.
func openDSN(t testing.TB, dsn string, opts switchboard.Options) *Catalog {
	t.Helper()
	d, err := switchboard.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	c, err := Open(context.Background(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newCatalog opens a catalog on a fresh schema and returns it with a direct
// connection to the same schema for assertions.
func newCatalog(t testing.TB) (*Catalog, *pgx.Conn, string) {
	t.Helper()
	dsn := pgtest.Schema(t, testDSN)
	c := openDSN(t, dsn, switchboard.Options{})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return c, conn, dsn
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func count(t testing.TB, conn *pgx.Conn, query string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func exec(t testing.TB, conn *pgx.Conn, query string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func inst(name, addr string, caps ...string) switchboard.Instance {
	return switchboard.Instance{Name: name, Type: switchboard.TypeWriter, Address: addr, Capabilities: caps, Version: "1.0.0"}
}
