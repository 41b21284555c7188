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

// opts gives instances without a TTL a long one: the suite's concurrency
// case must not see rows go stale on a loaded machine under -race.
var opts = switchboard.Options{DefaultTTL: time.Minute}

func TestConformanceFile(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog {
		dsn, err := switchboard.ParseDSN("sqlite://" + filepath.Join(t.TempDir(), "catalog.db"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := sqlite.Open(context.Background(), dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

func TestConformanceMemory(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog {
		c, err := switchboard.Open(context.Background(), "sqlite::memory:", opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

func TestLeaseConformanceFile(t *testing.T) {
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser {
		dsn, err := switchboard.ParseDSN("sqlite://" + filepath.Join(t.TempDir(), "catalog.db"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := sqlite.Open(context.Background(), dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

func TestLeaseConformanceMemory(t *testing.T) {
	quiet := opts
	quiet.Logger = slog.New(slog.DiscardHandler)
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser {
		c, err := switchboard.Open(context.Background(), "sqlite::memory:", quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		l, ok := c.(switchboard.Leaser)
		if !ok {
			t.Fatalf("%T is not a switchboard.Leaser", c)
		}
		return l
	})
}
