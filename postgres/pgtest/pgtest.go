// Package pgtest gives tests a throwaway PostgreSQL database per test
// binary and a fresh schema per test, so packages and tests running at the
// same time never see each other's rows.
//
// The server is SWITCHBOARD_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable); the database
// named there is only used to create and drop the throwaway ones.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnvDSN names the environment variable holding the admin DSN.
const EnvDSN = "SWITCHBOARD_TEST_POSTGRES"

// DefaultDSN is the admin DSN used when EnvDSN is unset.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// AdminDSN returns the DSN of the database used to create test databases.
func AdminDSN() string {
	if s := os.Getenv(EnvDSN); s != "" {
		return s
	}
	return DefaultDSN
}

// Main creates a database named sbtest_<pid>_<random>, stores its DSN in
// *dsn, runs the tests and drops the database. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &testDSN)) }
func Main(m *testing.M, dsn *string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, drop, err := NewDatabase(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n(set %s to a reachable PostgreSQL; start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start)\n", err, EnvDSN)
		return 1
	}
	*dsn = d
	code := m.Run()
	drop()
	return code
}

// NewDatabase creates a uniquely named database and returns its DSN and a
// function that drops it (terminating leftover connections).
func NewDatabase(ctx context.Context) (string, func(), error) {
	admin := AdminDSN()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connect %s: %w", admin, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("sbtest_%d_%s", os.Getpid(), random())
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: drop %s: %v\n", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: drop %s: %v\n", name, err)
		}
	}
	return u.String(), drop, nil
}

var schemas atomic.Int64

// Schema creates a fresh schema in the database of dsn, drops it when t
// ends, and returns dsn with search_path set to it: a catalog opened on that
// DSN migrates and uses its own tables.
func Schema(t testing.TB, dsn string) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", schemas.Add(1), strings.ToLower(random()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		// A server the test killed may still be letting go of its locks:
		// a deadlock with it is retried, not reported.
		for attempt := 1; ; attempt++ {
			_, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{name}.Sanitize()+` CASCADE`)
			var pe *pgconn.PgError
			if err != nil && errors.As(err, &pe) && pe.Code == "40P01" && attempt < 5 {
				time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Errorf("pgtest: drop schema %s: %v", name, err)
			}
			break
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func random() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RetryDeadlock runs do until it does not fail as a deadlock's victim
// (SQLSTATE 40P01), at most 20 times; any other error fails t. A test that
// drops or rewrites the catalog's tables while a catalog heartbeats or
// watches them (which lock the same tables in another order) needs it.
func RetryDeadlock(t testing.TB, what string, do func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := do()
		if err == nil {
			return
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "40P01" || attempt == 20 {
			t.Fatalf("%s (attempt %d): %v", what, attempt, err)
		}
	}
}
