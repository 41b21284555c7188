package postgres

import (
	"testing"

	"github.com/switchboard-io/switchboard/catalogtest"
)

func TestGetMany(t *testing.T) {
	c, _, _ := newCatalog(t)
	catalogtest.MultiGet(t, c)
}

func TestLeaseReader(t *testing.T) {
	c, _, _ := newCatalog(t)
	catalogtest.LeaseReading(t, c)
}
