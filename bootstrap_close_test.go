package switchboard_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// Close during a heartbeat in flight cancels that heartbeat: an orderly
// shutdown, not a heartbeat failure, so nothing is logged at WARN or ERROR.
func TestBootstrapCloseDoesNotLogTheHeartbeatItCancels(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	cat := &hangingCatalog{Catalog: testkit.OpenSQLite(t), entered: make(chan string, 1)}
	reg, err := switchboard.Bootstrap(context.Background(), cat, service("q"),
		switchboard.BootstrapOptions{HeartbeatInterval: 20 * time.Millisecond, DisableReaper: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cat.hang.Store(true)
	select {
	case <-cat.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no heartbeat in flight within 30s")
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("Close logged the heartbeat it cancelled:\n%s", out)
	}
	if st := reg.Stats(); st.Failures != 0 {
		t.Fatalf("Close counted the heartbeat it cancelled as a failure: %+v", st)
	}
}
