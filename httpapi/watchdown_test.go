package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// unwatchable is a catalog whose Watch fails with err at once.
type unwatchable struct {
	switchboard.Catalog
	err error
}

func (u unwatchable) Watch(context.Context, switchboard.Query) (<-chan switchboard.Event, error) {
	return nil, u.err
}

// unsynced is a catalog whose Watch reports err and never reads the
// catalog (no snapshot, no synced), until its context ends.
type unsynced struct {
	switchboard.Catalog
	err error
}

func (u unsynced) Watch(ctx context.Context, _ switchboard.Query) (<-chan switchboard.Event, error) {
	ch := make(chan switchboard.Event, 1)
	ch <- switchboard.Event{Kind: switchboard.EventError, Err: u.err}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// expectWatchDown checks a 503 of /v1/watch: its code, the mirror's error
// in its text, and Retry-After for busy alone.
func expectWatchDown(t *testing.T, s *srv, cause error, code string) httpapi.ErrorBody {
	t.Helper()
	return expectDown(t, fmt.Sprintf("watch while the mirror failed with %q", cause), get(t, s.url+"/v1/watch"), code, cause.Error())
}

// TestWatchDownCodes: the 503 a watch gets when the server's mirror cannot
// serve it has the code of the mirror's last error, as any endpoint gives
// it: no_catalog when the catalog is missing (an operator must act), busy
// when it is locked, unavailable otherwise; its text says the mirror's
// error.
func TestWatchDownCodes(t *testing.T) {
	noCatalog := fmt.Errorf("%w at /data/sb.db (nothing has registered there yet)", switchboard.ErrNoCatalog)
	busy := fmt.Errorf("sqlite: gave up after waiting 5s for the write lock: %w", switchboard.ErrBusy)
	refused := errors.New("dial tcp 10.0.0.9:5432: connection refused")

	// The mirror's Watch failed: it has stopped.
	for _, tc := range []struct {
		err  error
		code string
	}{{noCatalog, httpapi.CodeNoCatalog}, {busy, httpapi.CodeBusy}, {refused, httpapi.CodeUnavailable}} {
		s := serveOn(t, unwatchable{testkit.OpenSQLite(t), tc.err}, httpapi.Options{ReapInterval: -1})
		expectStoppedText(t, expectWatchDown(t, s, tc.err, tc.code))
	}

	// The mirror runs but has not read the catalog: the watch waits for
	// it (10 s), then is refused with the code of the mirror's error.
	t.Run("not read yet", func(t *testing.T) {
		t.Parallel()
		s := serveOn(t, unsynced{testkit.OpenSQLite(t), noCatalog}, httpapi.Options{ReapInterval: -1})
		testkit.WaitUntil(t, "the mirror's error in /v1/info", func() bool {
			code, b := call(t, "GET", s.url+"/v1/info", nil)
			var info httpapi.Info
			return code == 200 && json.Unmarshal(b, &info) == nil && strings.Contains(info.Error, noCatalog.Error())
		})
		body := expectWatchDown(t, s, noCatalog, httpapi.CodeNoCatalog)
		if !strings.Contains(body.Error, "has not read the catalog yet") || !strings.Contains(body.Error, "retry") {
			t.Errorf("watch before the mirror read the catalog: %q; want it to say so and to retry", body.Error)
		}
	})
}

// expectStoppedText checks the text of the 503 a watch gets from a server
// whose mirror has stopped: it says so (not that the catalog has not been
// read yet) and what to do: use another server, or restart this one.
func expectStoppedText(t *testing.T, body httpapi.ErrorBody) {
	t.Helper()
	for _, want := range []string{"has stopped", "restart", "another server"} {
		if !strings.Contains(body.Error, want) {
			t.Errorf("watch of a server whose mirror has stopped: %q; want it to say %q", body.Error, want)
		}
	}
	if strings.Contains(body.Error, "not read the catalog yet") {
		t.Errorf("watch of a server whose mirror has stopped: %q; it is not waiting to read the catalog: it has stopped", body.Error)
	}
}
