package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// failingList is a catalog whose List fails with err.
type failingList struct {
	switchboard.Catalog
	err error
}

func (f *failingList) List(context.Context, switchboard.Query) ([]switchboard.Instance, error) {
	return nil, f.err
}

// TestNoCatalogAndBusyCodes: a missing catalog (switchboard.ErrNoCatalog)
// and a busy one (switchboard.ErrBusy) are 503 like an unreachable catalog
// but with codes of their own, so a client can tell "an operator must act"
// and "retry" from "cannot reach it"; busy says when to retry.
func TestNoCatalogAndBusyCodes(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code       string
		retryAfter bool
	}{
		{fmt.Errorf("%w at /data/sb.db (nothing has registered there yet)", switchboard.ErrNoCatalog), httpapi.CodeNoCatalog, false},
		{fmt.Errorf("gave up after waiting 5s for the write lock: %w", switchboard.ErrBusy), httpapi.CodeBusy, true},
		{fmt.Errorf("dial tcp 10.0.0.9:5432: connection refused"), httpapi.CodeUnavailable, false},
	} {
		cat := &failingList{Catalog: testkit.OpenSQLite(t), err: tc.err}
		s := serveOn(t, cat, httpapi.Options{ReapInterval: -1})
		resp, err := http.Get(s.url + "/v1/instances")
		if err != nil {
			t.Fatal(err)
		}
		var body httpapi.ErrorBody
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || body.Code != tc.code || !strings.Contains(body.Error, tc.err.Error()) {
			t.Errorf("%v: %d %+v, want 503 with code %q and the error", tc.err, resp.StatusCode, body, tc.code)
		}
		ra := resp.Header.Get("Retry-After")
		if n, err := strconv.Atoi(ra); tc.retryAfter != (err == nil && n >= 1 && n <= 10) || (!tc.retryAfter && ra != "") {
			t.Errorf("%v: Retry-After %q; want a few seconds: %v", tc.err, ra, tc.retryAfter)
		}
	}
}
