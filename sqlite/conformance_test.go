package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/sqlite"
)

func TestConformanceFile(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog {
		dsn, err := switchboard.ParseDSN("sqlite://" + filepath.Join(t.TempDir(), "catalog.db"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := sqlite.Open(context.Background(), dsn, switchboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

func TestConformanceMemory(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog {
		c, err := switchboard.Open(context.Background(), "sqlite::memory:", switchboard.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}
