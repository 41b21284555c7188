package sqlite_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/sqlite"
)

// opts gives instances without a TTL a long one (the suite's concurrency
// case must not see rows go stale on a loaded machine under -race), and
// keeps migration logs out of the test output.
var opts = switchboard.Options{DefaultTTL: time.Minute, Logger: slog.New(slog.DiscardHandler)}

// openFile and openMemory give each test a fresh catalog.
func openFile(t *testing.T) *sqlite.Catalog {
	return open(t, "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"))
}

func openMemory(t *testing.T) *sqlite.Catalog { return open(t, "sqlite::memory:") }

func open(t *testing.T, raw string) *sqlite.Catalog {
	t.Helper()
	dsn, err := switchboard.ParseDSN(raw)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sqlite.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformanceFile(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog { return openFile(t) })
}

func TestConformanceMemory(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog { return openMemory(t) })
}

func TestLeaseConformanceFile(t *testing.T) {
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser { return openFile(t) })
}

func TestLeaseConformanceMemory(t *testing.T) {
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser { return openMemory(t) })
}

func TestLimitsFile(t *testing.T) {
	catalogtest.RunLimits(t, func(t *testing.T) switchboard.Catalog { return openFile(t) })
}

func TestLimitsMemory(t *testing.T) {
	catalogtest.RunLimits(t, func(t *testing.T) switchboard.Catalog { return openMemory(t) })
}
