package remote_test

import (
	"context"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/internal/testkit"
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

// judged is a client of a server whose check results are written on the
// server's own catalog, as its check runners write them: the suite's
// health cases then check what a client of the server sees of them
// (status events, critical rows out of default lists and watches).
type judged struct {
	*remote.Client
	backend switchboard.HealthSetter
}

// SetHealth writes on the server's catalog and returns the instance as
// the server shows it to clients.
func (j judged) SetHealth(ctx context.Context, id string, h switchboard.Health) (switchboard.Instance, error) {
	if _, err := j.backend.SetHealth(ctx, id, h); err != nil {
		return switchboard.Instance{}, err
	}
	return j.Get(ctx, id)
}

func judgedOver(t *testing.T, backend switchboard.Catalog) switchboard.Catalog {
	url, _ := serve(t, backend, unboundedLeases)
	return judged{Client: client(t, url, remote.Config{}), backend: backend.(switchboard.HealthSetter)}
}

// TestTrafficConformance runs the shared traffic-state suite through a
// server on each SQL backend: weight, zone and drain round-trip, and check
// results written on the server's catalog reach its clients.
func TestTrafficConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		catalogtest.Traffic(t, func(t *testing.T) switchboard.Catalog { return judgedOver(t, testkit.OpenSQLite(t)) })
	})
	t.Run("postgres", func(t *testing.T) {
		catalogtest.Traffic(t, func(t *testing.T) switchboard.Catalog { return judgedOver(t, openPG(t, pgtest.Schema(t, testDSN))) })
	})
}
