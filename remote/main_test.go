package remote_test

import (
	"context"
	"log/slog"
	"math"
	"os"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/internal/testkit/apitest"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
	"github.com/switchboard-io/switchboard/remote"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

// testDSN is this test binary's throwaway PostgreSQL database.
var testDSN string

func TestMain(m *testing.M) {
	code := pgtest.Main(m, &testDSN)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// openPG opens a catalog on dsn, closed at cleanup.
func openPG(t testing.TB, dsn string) switchboard.Catalog {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

var quiet = slog.New(slog.DiscardHandler)

// serve runs an API server over cat on 127.0.0.1:0 and returns its URL.
// The server's own reaper is off: the conformance suite counts what its
// Reap calls delete, which a concurrent reaper would take first.
func serve(t testing.TB, cat switchboard.Catalog, opts httpapi.Options) (string, *httpapi.Server) {
	t.Helper()
	opts.Logger = quiet
	if opts.ReapInterval == 0 {
		opts.ReapInterval = -1
	}
	return apitest.Serve(t, cat, opts)
}

// client opens the remote catalog of url, closed at cleanup.
func client(t testing.TB, url string, cfg remote.Config) *remote.Client {
	t.Helper()
	cfg.Logger = quiet
	c, err := remote.Open(context.Background(), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unboundedLeases lets a server take leases for any TTL: the conformance
// suite takes one for 292 years, which a server refuses by default (its
// max_lease_ttl is tested in httpapi).
var unboundedLeases = httpapi.Options{MaxLeaseTTL: time.Duration(math.MaxInt64)}

// overSQLite is a remote catalog through a fresh server on a fresh SQLite
// file.
func overSQLite(t *testing.T) *remote.Client {
	url, _ := serve(t, testkit.OpenSQLite(t), unboundedLeases)
	return client(t, url, remote.Config{})
}
