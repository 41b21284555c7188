package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

func openErr(dsn string, opts switchboard.Options) error {
	d, err := switchboard.ParseDSN(dsn)
	if err != nil {
		return err
	}
	opts.Logger = quietLogger()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(ctx, d, opts)
	if err == nil {
		c.Close()
	}
	return err
}

// With MustExist, a schema without a catalog is ErrNoCatalog and stays
// empty; a current catalog opens without migrating (not even the migration
// lock); an unreachable server says so.
func TestMustExist(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	must := switchboard.Options{MustExist: true}
	err := openErr(dsn, must)
	if !errors.Is(err, switchboard.ErrNoCatalog) || !strings.Contains(err.Error(), "nothing has registered there yet") {
		t.Fatalf("empty schema: %v", err)
	}
	_, conn, dsn := newCatalog(t)
	// Another process migrating holds the migration lock: a read-only open
	// of a current catalog does not wait for it.
	exec(t, conn, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, lockMigrate)
	defer exec(t, conn, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, lockMigrate)
	if err := openErr(dsn, must); err != nil {
		t.Fatalf("read-only open of a current catalog: %v", err)
	}
}

func TestMustExistCreatesNothing(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	if err := openErr(dsn, switchboard.Options{MustExist: true}); !errors.Is(err, switchboard.ErrNoCatalog) {
		t.Fatalf("want ErrNoCatalog, got %v", err)
	}
	c := openDSN(t, dsn, switchboard.Options{}) // a writer creates it
	var tables int
	if err := c.pool.QueryRow(ctxT(t), `SELECT count(*) FROM schema_migrations`).Scan(&tables); err != nil || tables != len(migrations)-1 {
		t.Fatalf("migrations after the first real open: %d, %v", tables, err)
	}
}

func TestUnreachable(t *testing.T) {
	for _, opts := range []switchboard.Options{{}, {MustExist: true}} {
		err := openErr("postgres://postgres:s3cr3t@127.0.0.1:1/test?connect_timeout=2", opts)
		if !errors.Is(err, switchboard.ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach the catalog at 127.0.0.1:1/test") ||
			strings.Contains(err.Error(), "migrate") || strings.Contains(err.Error(), "s3cr3t") {
			t.Fatalf("MustExist %v: %v", opts.MustExist, err)
		}
	}
}
