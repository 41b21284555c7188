package httpapi_test

import (
	"context"
	"fmt"
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
		err  error
		code string
	}{
		{fmt.Errorf("%w at /data/sb.db (nothing has registered there yet)", switchboard.ErrNoCatalog), httpapi.CodeNoCatalog},
		{fmt.Errorf("gave up after waiting 5s for the write lock: %w", switchboard.ErrBusy), httpapi.CodeBusy},
		{fmt.Errorf("dial tcp 10.0.0.9:5432: connection refused"), httpapi.CodeUnavailable},
	} {
		cat := &failingList{Catalog: testkit.OpenSQLite(t), err: tc.err}
		s := serveOn(t, cat, httpapi.Options{ReapInterval: -1})
		expectDown(t, fmt.Sprintf("list failing with %v", tc.err), get(t, s.url+"/v1/instances"), tc.code, tc.err.Error())
	}
}
