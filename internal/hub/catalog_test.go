package hub_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	_ "github.com/switchboard-io/switchboard/postgres"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

// These tests run the hub behind the real backends; the hub's logic alone is
// tested against an in-memory source in hub_test.go.

var pgDSN string

func TestMain(m *testing.M) {
	code := pgtest.Main(m, &pgDSN)
	if cliDir != "" {
		os.RemoveAll(cliDir)
	}
	os.Exit(code)
}

var (
	cliOnce sync.Once
	cliDir  string
	cliBin  string
	cliErr  error
)

// cli builds the CLI once per test binary.
func cli(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		if cliDir, cliErr = os.MkdirTemp("", "switchboard-hub-test-"); cliErr != nil {
			return
		}
		cliBin = filepath.Join(cliDir, "switchboard")
		build := exec.Command("go", "build", "-o", cliBin, "github.com/switchboard-io/switchboard/cmd/switchboard")
		if out, err := build.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build the CLI: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

// backends opens one catalog per real backend.
func backends(t *testing.T) map[string]func(t *testing.T) switchboard.Catalog {
	return map[string]func(t *testing.T) switchboard.Catalog{
		"sqlite": func(t *testing.T) switchboard.Catalog { return testkit.OpenSQLite(t) },
		"postgres": func(t *testing.T) switchboard.Catalog {
			cat, err := switchboard.Open(context.Background(), pgtest.Schema(t, pgDSN),
				switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cat.Close() })
			return cat
		},
	}
}

// nextEvent returns the next event that is not a marker, failing after a
// generous deadline.
func nextEvent(t *testing.T, ch <-chan switchboard.Event) switchboard.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("watch channel closed")
			}
			if ev.Kind == switchboard.EventSynced {
				continue
			}
			return ev
		case <-timeout:
			t.Fatal("no event within 20s")
		}
	}
}

// Mutating the maps of the instance Register returned and
// registering it again must store the change and emit `updated` (the hub
// used to share those maps, so its mirror already held the change).
func TestMutatedReturnedInstanceIsUpdated(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			cat := open(t)
			ctx := context.Background()
			ch, err := cat.Watch(ctx, switchboard.Query{})
			if err != nil {
				t.Fatal(err)
			}
			in := switchboard.Instance{Name: "svc", Type: switchboard.TypeQuerier, Address: "127.0.0.1:9000",
				Capabilities: []string{"a"}, Metadata: map[string]string{"k": "v"}, TTL: time.Minute}
			out, err := cat.Register(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if ev := nextEvent(t, ch); ev.Kind != switchboard.EventAdded || ev.Instance.Metadata["k"] != "v" {
				t.Fatalf("want added with k=v, got %+v", ev)
			}
			out.Metadata["k"] = "w"
			out.Capabilities[0] = "b"
			if _, err := cat.Register(ctx, out); err != nil {
				t.Fatal(err)
			}
			stored, err := cat.Get(ctx, out.ID)
			if err != nil || stored.Metadata["k"] != "w" {
				t.Fatalf("stored: %+v, %v", stored, err)
			}
			ev := nextEvent(t, ch)
			if ev.Kind != switchboard.EventUpdated || ev.Instance.Metadata["k"] != "w" || !ev.Instance.HasCapability("b") {
				t.Fatalf("want updated with k=w and capability b, got %+v", ev)
			}
		})
	}
}
