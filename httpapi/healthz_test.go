package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// clockless is a catalog whose clock cannot be read, with an error that
// names what an anonymous prober must not learn.
type clockless struct{ switchboard.Catalog }

const leakyError = "dial tcp db-7.internal.example:5432 (user=sb dbname=catalog): SELECT now(): connection refused"

func (clockless) Now(context.Context) (time.Time, error) { return time.Time{}, errors.New(leakyError) }

// TestHealthzDetailNeedsToken: /healthz needs no token, but with a Token
// configured only a request that carries it hears why the catalog failed
// (hosts, DSN fragments, SQL); any other gets the status alone. Without a
// Token configured, everyone gets the detail, as before.
func TestHealthzDetailNeedsToken(t *testing.T) {
	const token = "healthz-token"
	s := serveOn(t, clockless{testkit.OpenSQLite(t)}, httpapi.Options{Token: token, ReapInterval: -1})
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic " + token}} {
		code, b := call(t, "GET", s.url+"/healthz", nil, hdr...)
		if code != 503 || strings.TrimSpace(string(b)) != `{"status":"unavailable"}` {
			t.Errorf("healthz with %q: %d %s; want 503 with the status alone", hdr, code, b)
		}
	}
	code, b := call(t, "GET", s.url+"/healthz", nil, "Authorization", "Bearer "+token)
	expectError(t, code, b, 503, "unavailable", "")
	if !strings.Contains(string(b), leakyError) {
		t.Errorf("healthz with the token: %s; want the catalog's error", b)
	}

	open := serveOn(t, clockless{testkit.OpenSQLite(t)}, httpapi.Options{ReapInterval: -1})
	code, b = call(t, "GET", open.url+"/healthz", nil)
	expectError(t, code, b, 503, "unavailable", "")
	if !strings.Contains(string(b), leakyError) {
		t.Errorf("healthz without a token configured: %s; want the catalog's error", b)
	}

	// A healthy catalog: 200 for everyone, token or not.
	ok := start(t, httpapi.Options{Token: token, ReapInterval: -1})
	if code, b := call(t, "GET", ok.url+"/healthz", nil); code != 200 || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Errorf("healthz of a healthy server without the token: %d %s", code, b)
	}
}

// failingNow is a catalog whose clock read fails with err.
type failingNow struct {
	switchboard.Catalog
	err error
}

func (f failingNow) Now(context.Context) (time.Time, error) { return time.Time{}, f.err }

// TestHealthzCodes: the detail of /healthz (with the token, or none
// configured) has the code any endpoint gives the catalog's error: a
// missing catalog is no_catalog, a busy one busy (with Retry-After), any
// other failure unavailable. A request without the configured token still
// gets the status alone.
func TestHealthzCodes(t *testing.T) {
	const token = "healthz-token"
	for _, tc := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("%w at /data/sb.db (nothing has registered there yet)", switchboard.ErrNoCatalog), httpapi.CodeNoCatalog},
		{fmt.Errorf("sqlite: gave up after waiting 5s for the write lock: %w", switchboard.ErrBusy), httpapi.CodeBusy},
		{errors.New(leakyError), httpapi.CodeUnavailable},
		// An error the API answers with another status elsewhere is
		// still the catalog failing here.
		{fmt.Errorf("odd: %w", switchboard.ErrNotFound), httpapi.CodeUnavailable},
	} {
		for _, tok := range []string{token, ""} {
			s := serveOn(t, failingNow{testkit.OpenSQLite(t), tc.err}, httpapi.Options{Token: tok, ReapInterval: -1})
			hdr := []string{}
			if tok != "" {
				code, b := call(t, "GET", s.url+"/healthz", nil)
				if code != 503 || strings.TrimSpace(string(b)) != `{"status":"unavailable"}` {
					t.Errorf("%v: healthz without the token: %d %s; want 503 with the status alone", tc.err, code, b)
				}
				hdr = []string{"Authorization", "Bearer " + tok}
			}
			expectDown(t, fmt.Sprintf("%v (token %q): healthz", tc.err, tok), get(t, s.url+"/healthz", hdr...), tc.code, tc.err.Error())
		}
	}
}

// get does one GET with headers (name, value, …) and returns the response,
// its body unread.
func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	return request(t, "GET", url, nil, hdr...)
}

// TestHealthzTablesDropped: /healthz reads the catalog's rows, not only its
// clock. On a PostgreSQL catalog whose tables were dropped under the
// server (a database restored empty), it answers 503 with no_catalog, and
// the detail a token holder gets says that the tables are missing; a
// request without the token still gets the status alone.
func TestHealthzTablesDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, drop, err := pgtest.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	cat, err := switchboard.Open(ctx, dsn, switchboard.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	const token = "healthz-token"
	s := serveOn(t, cat, httpapi.Options{Token: token, ReapInterval: -1, DSN: dsn})
	auth := []string{"Authorization", "Bearer " + token}
	register(t, s, instanceBody("a"), auth...)
	if code, b := call(t, "GET", s.url+"/healthz", nil, auth...); code != 200 {
		t.Fatalf("healthz of a healthy catalog: %d %s", code, b)
	}

	dropTables(t, ctx, dsn)
	body := expectDown(t, "healthz after the catalog's tables were dropped", get(t, s.url+"/healthz", auth...),
		httpapi.CodeNoCatalog, "tables missing")
	if !strings.Contains(body.Error, "does not exist") {
		t.Errorf("healthz after the catalog's tables were dropped: %q; want the server's error too", body.Error)
	}
	if code, b := call(t, "GET", s.url+"/healthz", nil); code != 503 || strings.TrimSpace(string(b)) != `{"status":"unavailable"}` {
		t.Errorf("healthz without the token after the tables were dropped: %d %s; want 503 with the status alone", code, b)
	}
}

// dropTables drops every table of dsn's schema, as a database restarted
// empty has none. The server's mirror reads the same tables meanwhile:
// PostgreSQL may end the DROP as a deadlock's victim (SQLSTATE 40P01),
// and then it is tried again.
func dropTables(t *testing.T, ctx context.Context, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(quote_ident(tablename), ', '), '')
		FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil || tables == "" {
		t.Fatalf("the catalog's tables: %q %v", tables, err)
	}
	for attempt := 1; ; attempt++ {
		_, err := conn.Exec(ctx, `DROP TABLE `+tables+` CASCADE`)
		var pe *pgconn.PgError
		if err == nil {
			return
		}
		if !errors.As(err, &pe) || pe.Code != "40P01" || attempt == 20 {
			t.Fatalf("drop the catalog's tables (attempt %d): %v", attempt, err)
		}
	}
}
