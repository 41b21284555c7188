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

func TestHeartbeatFor(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		0:                       switchboard.DefaultHeartbeatInterval, // the catalog's default, unknown
		-time.Second:            switchboard.DefaultHeartbeatInterval,
		time.Hour:               3 * time.Second,
		9 * time.Second:         3 * time.Second,
		3 * time.Second:         time.Second,
		2 * time.Second:         2 * time.Second / 3,
		30 * time.Millisecond:   switchboard.MinHeartbeatInterval,
		20 * time.Millisecond:   switchboard.MinHeartbeatInterval,
		15 * time.Millisecond:   switchboard.MinHeartbeatInterval, // no interval fits: ValidateHeartbeat says so
		switchboard.DefaultTTL:  3 * time.Second,
		100 * time.Millisecond:  100 * time.Millisecond / 3,
		1500 * time.Millisecond: 500 * time.Millisecond,
	} {
		got := switchboard.HeartbeatFor(ttl)
		if got != want {
			t.Errorf("HeartbeatFor(%v) = %v, want %v", ttl, got, want)
		}
		if ttl >= 2*switchboard.MinHeartbeatInterval {
			if err := switchboard.ValidateHeartbeat("h", got, ttl); err != nil {
				t.Errorf("HeartbeatFor(%v) = %v does not validate: %v", ttl, got, err)
			}
		}
	}
}

// Without a HeartbeatInterval, Bootstrap derives it from the TTL (given, or
// the catalog's default as stored) as the CLI does, min(3s, ttl/3): a TTL
// under 6 s alone used to be refused (the 3 s default is over half of it),
// and, with the catalog's default TTL, only after storing and undoing the
// registration (now checked before, see TestBootstrapRefusedKeepsWhatWasStored).
func TestBootstrapDerivesHeartbeatFromTTL(t *testing.T) {
	ctx := context.Background()
	logs := &testkit.SyncBuffer{}
	cat, err := switchboard.Open(ctx, "sqlite://"+t.TempDir()+"/c.db",
		switchboard.Options{DefaultTTL: 1500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	log := slog.New(slog.NewTextHandler(logs, nil))
	for _, tc := range []struct {
		name     string
		ttl      time.Duration
		interval string // as logged
	}{
		{"given TTL", 2 * time.Second, "heartbeat=666.666666ms"},
		{"catalog's default TTL", 0, "heartbeat=500ms"},
	} {
		in := service("derived")
		in.TTL = tc.ttl
		reg, err := switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{Logger: log})
		if err != nil {
			t.Fatalf("%s: Bootstrap without a HeartbeatInterval: %v", tc.name, err)
		}
		if !strings.Contains(logs.String(), tc.interval) {
			t.Errorf("%s: want %s logged:\n%s", tc.name, tc.interval, logs)
		}
		testkit.WaitUntil(t, "a heartbeat", func() bool { return reg.Stats().Heartbeats > 0 })
		if err := reg.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A TTL no interval fits is the TTL's error, before anything is stored.
	in := service("short")
	in.TTL = 15 * time.Millisecond
	_, err = switchboard.Bootstrap(ctx, cat, in, switchboard.BootstrapOptions{Logger: log})
	var fe *switchboard.FieldError
	if !errors.As(err, &fe) || fe.Field != "ttl" || !strings.Contains(err.Error(), "at least 20ms") {
		t.Fatalf("Bootstrap with a 15ms TTL: %v", err)
	}
	if all, err := cat.List(ctx, switchboard.Query{All: true}); err != nil || len(all) != 0 {
		t.Fatalf("rows left: %+v, %v", all, err)
	}
}
