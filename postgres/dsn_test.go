package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// A DSN's scheme is case-insensitive (RFC 3986): "POSTGRES://…" and
// "PostgreSQL://…" open the same catalog as "postgres://…", through
// switchboard.Open too, although pgx itself reads only a lower-case scheme
// as a URL.
func TestOpenSchemeAnyCase(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || scheme != "postgres" {
		t.Fatalf("test DSN %q is not a postgres:// URL", switchboard.RedactDSN(dsn))
	}
	lower := openDSN(t, dsn, switchboard.Options{})
	stored, err := lower.Register(ctxT(t), inst("cased", "127.0.0.1:7000"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"POSTGRES", "Postgres", "PostgreSQL", "POSTGRESQL"} {
		cat, err := switchboard.Open(context.Background(), s+"://"+rest, switchboard.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("Open(%s://…): %v", s, err)
		}
		got, err := cat.Get(ctxT(t), stored.ID)
		cat.Close()
		if err != nil || got.Name != "cased" {
			t.Fatalf("%s://…: Get = %+v, %v; want the row registered through postgres://…", s, got, err)
		}
	}
}

// connString lowers only a postgres scheme: a keyword/value DSN is not a
// URL, and a "://" in it (a password) is left alone.
func TestConnString(t *testing.T) {
	for in, want := range map[string]string{
		"POSTGRES://u@h/db":              "postgres://u@h/db",
		"PostgreSQL://U:P@H/DB":          "postgresql://U:P@H/DB",
		"postgres://u@h/db":              "postgres://u@h/db",
		"host=h password=Ab://Cd":        "host=h password=Ab://Cd",
		"HOST=h dbname=X password=P://Q": "HOST=h dbname=X password=P://Q",
	} {
		if got := connString(in); got != want {
			t.Errorf("connString(%q) = %q, want %q", in, got, want)
		}
	}
}
