package sqlite

import (
	"testing"

	"github.com/switchboard-io/switchboard/catalogtest"
)

func TestGetMany(t *testing.T) {
	c, _ := newFile(t)
	catalogtest.MultiGet(t, c)
}

func TestLeaseReader(t *testing.T) {
	c, _ := newFile(t)
	catalogtest.LeaseReading(t, c)
}
