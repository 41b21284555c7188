package postgres

import (
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestConformance runs the shared suite unchanged, each case on a fresh
// schema of this binary's database.
func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) switchboard.Catalog {
		return openDSN(t, pgtest.Schema(t, testDSN), switchboard.Options{})
	})
}

// TestLeaseConformance runs the shared lease suite, each case on a fresh
// schema.
func TestLeaseConformance(t *testing.T) {
	catalogtest.RunLeases(t, func(t *testing.T) switchboard.Leaser {
		return openDSN(t, pgtest.Schema(t, testDSN), switchboard.Options{})
	})
}

// TestLimits runs the shared input-limit suite.
func TestLimits(t *testing.T) {
	catalogtest.RunLimits(t, func(t *testing.T) switchboard.Catalog {
		return openDSN(t, pgtest.Schema(t, testDSN), switchboard.Options{})
	})
}

// TestTrafficConformance runs the shared traffic-state suite (weights,
// zones, drain, check results), each case on a fresh schema.
func TestTrafficConformance(t *testing.T) {
	catalogtest.Traffic(t, func(t *testing.T) switchboard.Catalog {
		return openDSN(t, pgtest.Schema(t, testDSN), switchboard.Options{})
	})
}
