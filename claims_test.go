package switchboard_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// Two live Registrations of one id on one catalog would share its row:
// closing the first would delete the row the second keeps alive (until a
// heartbeat of the second wrote it again), and each heartbeat loop would
// write its own content over the other's. The second Bootstrap is refused
// before it stores anything, whatever its interval; once the first is
// closed, the id is free again.
func TestBootstrapRefusesALiveID(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	in := service("first")
	in.ID, in.Version = "dup", "1"
	first, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	again := service("second")
	again.ID, again.Version = "dup", "2"
	for _, every := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 0} {
		_, err := switchboard.Bootstrap(ctx, cat, again, switchboard.BootstrapOptions{HeartbeatInterval: every, Logger: quiet})
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "id" || !errors.Is(err, switchboard.ErrInvalid) ||
			!strings.Contains(err.Error(), `"dup"`) || !strings.Contains(err.Error(), "Close that one first") {
			t.Fatalf("second Bootstrap of a live id (interval %v): %v", every, err)
		}
	}
	if got, err := cat.Get(ctx, "dup"); err != nil || got.Name != "first" || got.Version != "1" {
		t.Fatalf("a refused Bootstrap changed the row: %+v, %v", got, err)
	}
	// An id the catalog chose is claimed too.
	generated, err := switchboard.Bootstrap(ctx, cat, service("gen"), switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	same := service("gen")
	same.ID = generated.ID()
	if _, err := switchboard.Bootstrap(ctx, cat, same, switchboard.BootstrapOptions{Logger: quiet}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("Bootstrap with the id of a live registration the catalog named: %v", err)
	}
	// Another catalog is another namespace of ids.
	other, err := switchboard.Bootstrap(ctx, testkit.OpenSQLite(t), again, switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatalf("the same id on another catalog: %v", err)
	}
	other.Close()
	// Closed, the id is free; a Bootstrap refused for its interval (too
	// long for the catalog's default TTL of 10 s) does not keep it.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	dflt := again
	dflt.TTL = 0
	if _, err := switchboard.Bootstrap(ctx, cat, dflt, switchboard.BootstrapOptions{HeartbeatInterval: 6 * time.Second, Logger: quiet}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("a heartbeat of 6 s for the default TTL of 10 s: %v", err)
	}
	second, err := switchboard.Bootstrap(ctx, cat, again, switchboard.BootstrapOptions{HeartbeatInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatalf("Bootstrap after the first was closed: %v", err)
	}
	if got, err := cat.Get(ctx, "dup"); err != nil || got.Name != "second" {
		t.Fatalf("row after the second Bootstrap: %+v, %v", got, err)
	}
	// Closing the first again (idempotent) does not touch the second's row.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Get(ctx, "dup"); err != nil {
		t.Fatalf("the second's row after the first's second Close: %v", err)
	}
	for _, r := range []*switchboard.Registration{second, generated} {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
