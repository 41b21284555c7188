package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// leakyError names what an anonymous prober must not learn.
const leakyError = "dial tcp db-7.internal.example:5432 (user=sb dbname=catalog): SELECT now(): connection refused"

// TestHealthzDetailNeedsToken: /healthz needs no token, but with a Token
// configured only a request that carries it hears why the catalog failed
// (hosts, DSN fragments, SQL); any other gets the status alone. Without a
// Token configured, everyone gets the detail, as before.
func TestHealthzDetailNeedsToken(t *testing.T) {
	const token = "healthz-token"
	s := serveOn(t, failingNow{testkit.OpenSQLite(t), errors.New(leakyError)}, httpapi.Options{Token: token, ReapInterval: -1})
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

	open := serveOn(t, failingNow{testkit.OpenSQLite(t), errors.New(leakyError)}, httpapi.Options{ReapInterval: -1})
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

// failingGet is a catalog whose clock answers and whose row reads fail.
type failingGet struct {
	switchboard.Catalog
	err error
}

func (f failingGet) Get(context.Context, string) (switchboard.Instance, error) {
	return switchboard.Instance{}, f.err
}

// TestHealthzCodes: the detail of /healthz (with the token, or none
// configured) has the code any endpoint gives the catalog's error, whether
// its clock or a read of its rows failed: a busy one busy (with
// Retry-After), any other failure unavailable, and a request without the
// configured token gets the status alone. A missing catalog is 200,
// "degraded", no_catalog: the server must stay in rotation for the writes
// that create it.
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
		for _, how := range []struct {
			name string
			cat  func() switchboard.Catalog
			what string // the start of the error
		}{
			{"clock", func() switchboard.Catalog { return failingNow{testkit.OpenSQLite(t), tc.err} }, "catalog unavailable: "},
			{"row", func() switchboard.Catalog { return failingGet{testkit.OpenSQLite(t), tc.err} }, "catalog unreadable: "},
		} {
			if how.name == "row" && errors.Is(tc.err, switchboard.ErrNotFound) {
				continue // a row not found is the healthy answer
			}
			for _, tok := range []string{token, ""} {
				what := fmt.Sprintf("%v (%s, token %q): healthz", tc.err, how.name, tok)
				s := serveOn(t, how.cat(), httpapi.Options{Token: tok, ReapInterval: -1})
				hdr := []string{}
				if tok != "" {
					code, b := call(t, "GET", s.url+"/healthz", nil)
					want, wantCode := `{"status":"unavailable"}`, 503
					if tc.code == httpapi.CodeNoCatalog {
						want, wantCode = `{"code":"no_catalog","status":"degraded"}`, 200
					}
					if code != wantCode || strings.TrimSpace(string(b)) != want {
						t.Errorf("%s without the token: %d %s; want %d %s", what, code, b, wantCode, want)
					}
					hdr = []string{"Authorization", "Bearer " + tok}
				}
				if tc.code == httpapi.CodeNoCatalog {
					code, b := call(t, "GET", s.url+"/healthz", nil, hdr...)
					var body struct{ Status, Code, Error string }
					if err := json.Unmarshal(b, &body); err != nil || code != 200 || body.Status != "degraded" || body.Code != tc.code ||
						!strings.Contains(body.Error, tc.err.Error()) {
						t.Errorf("%s: %d %s; want 200, degraded, %s and the catalog's error", what, code, b, tc.code)
					}
					continue
				}
				expectDown(t, what, get(t, s.url+"/healthz", hdr...), tc.code, how.what+tc.err.Error())
			}
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
// server (a database restored empty), it answers 200 "degraded" with
// no_catalog, and the detail a token holder gets says that the tables are
// missing; a request without the token gets the status and code alone. A
// registration through the server creates them again, and it is "ok".
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
	// 200, "degraded": a 503 would take the server out of rotation, away
	// from the registrations that create the tables again.
	code, b := call(t, "GET", s.url+"/healthz", nil, auth...)
	var body struct{ Status, Code, Error string }
	if err := json.Unmarshal(b, &body); err != nil || code != 200 || body.Status != "degraded" || body.Code != httpapi.CodeNoCatalog ||
		!strings.Contains(body.Error, "tables missing") || !strings.Contains(body.Error, "does not exist") {
		t.Fatalf("healthz after the catalog's tables were dropped: %d %s; want 200, degraded, no_catalog and the server's error", code, b)
	}
	if code, b := call(t, "GET", s.url+"/healthz", nil); code != 200 || strings.TrimSpace(string(b)) != `{"code":"no_catalog","status":"degraded"}` {
		t.Errorf("healthz without the token after the tables were dropped: %d %s; want 200 with the status and code alone", code, b)
	}
	// A registration through the server creates the tables again.
	register(t, s, instanceBody("b"), auth...)
	if code, b := call(t, "GET", s.url+"/healthz", nil, auth...); code != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("healthz after a registration recreated the tables: %d %s", code, b)
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
	pgtest.RetryDeadlock(t, "drop the catalog's tables", func() error {
		_, err := conn.Exec(ctx, `DROP TABLE `+tables+` CASCADE`)
		return err
	})
}
