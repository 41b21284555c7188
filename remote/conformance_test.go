package remote_test

import (
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
	"github.com/switchboard-io/switchboard/remote"
)

func TestConformanceOverSQLite(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog { return overSQLite(t) })
}

func TestLeasesOverSQLite(t *testing.T) {
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser { return overSQLite(t) })
}

// overPG is a remote catalog through a fresh server on a fresh schema of
// this binary's PostgreSQL database.
func overPG(t *testing.T) *remote.Client {
	url, _ := serve(t, openPG(t, pgtest.Schema(t, testDSN)), unboundedLeases)
	return client(t, url, remote.Config{})
}

func TestConformanceOverPostgres(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog { return overPG(t) })
}

func TestLeasesOverPostgres(t *testing.T) {
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser { return overPG(t) })
}

func TestLimitsOverSQLite(t *testing.T) {
	catalogtest.RunLimits(t, func(t *testing.T) switchboard.Catalog { return overSQLite(t) })
}

func TestLimitsOverPostgres(t *testing.T) {
	catalogtest.RunLimits(t, func(t *testing.T) switchboard.Catalog { return overPG(t) })
}

// TestTrafficConformance runs the shared traffic-state suite through a
// server on each SQL backend: weight, zone and drain round-trip; check
// results are written by the server's own runners, not by clients, so
// the health cases skip (remote.Client is not a HealthSetter).
func TestTrafficConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		catalogtest.Traffic(t, func(t *testing.T) switchboard.Catalog { return overSQLite(t) })
	})
	t.Run("postgres", func(t *testing.T) {
		catalogtest.Traffic(t, func(t *testing.T) switchboard.Catalog { return overPG(t) })
	})
}
