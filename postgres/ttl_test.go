package postgres

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestDefaultTTLRounded: the catalog's default TTL is stored as every TTL
// is (switchboard.RoundTTL): rounded up to whole milliseconds, as on
// SQLite, not kept to the microsecond.
func TestDefaultTTLRounded(t *testing.T) {
	ctx := ctxT(t)
	dflt := 3*time.Second + time.Microsecond
	c := openDSN(t, pgtest.Schema(t, testDSN), switchboard.Options{DefaultTTL: dflt})
	out, err := c.Register(ctx, inst("dflt", "127.0.0.1:7000"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*time.Second + time.Millisecond; out.TTL != want || got.TTL != want {
		t.Fatalf("default TTL %v stored as %v (Register) and %v (Get), want %v", dflt, out.TTL, got.TTL, want)
	}
}
