package sqlite

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestDefaultTTLRounded: the catalog's default TTL is stored as every TTL
// is (millis.Round): rounded up to whole milliseconds, as on
// PostgreSQL, never cut to less than configured.
func TestDefaultTTLRounded(t *testing.T) {
	opts := quiet
	opts.DefaultTTL = 3*time.Second + time.Microsecond
	c, err := Open(tctx(t), switchboard.DSN{Scheme: "sqlite", Memory: true, Raw: "sqlite::memory:"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	out := mustRegister(t, c, sample("dflt"))
	got, err := c.Get(tctx(t), out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*time.Second + time.Millisecond; out.TTL != want || got.TTL != want {
		t.Fatalf("default TTL %v stored as %v (Register) and %v (Get), want %v", opts.DefaultTTL, out.TTL, got.TTL, want)
	}
	// Rounded once, when the catalog opens, not at every registration.
	if want := 3*time.Second + time.Millisecond; c.opts.DefaultTTL != want {
		t.Fatalf("Open kept the default TTL %v, want it rounded to %v", c.opts.DefaultTTL, want)
	}
}
