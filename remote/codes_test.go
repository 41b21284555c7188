package remote

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// TestBusyAndNoCatalogCodes: the server's "busy" and "no_catalog" answers
// are switchboard.ErrBusy and switchboard.ErrNoCatalog, as from any
// backend, and stay ErrUnavailable (a retry may cure them, as every
// backend's callers treat those sentinels); "unavailable" is neither. So
// are a watch's first connection refused with them.
func TestBusyAndNoCatalogCodes(t *testing.T) {
	for _, tc := range []struct {
		code     string
		is, not  []error
		retryHdr bool
	}{
		{schema.CodeBusy, []error{switchboard.ErrBusy, ErrUnavailable}, []error{switchboard.ErrNoCatalog, switchboard.ErrInvalid}, true},
		{schema.CodeNoCatalog, []error{switchboard.ErrNoCatalog, ErrUnavailable}, []error{switchboard.ErrBusy, switchboard.ErrInvalid}, false},
		{schema.CodeUnavailable, []error{ErrUnavailable}, []error{switchboard.ErrBusy, switchboard.ErrNoCatalog}, false},
	} {
		text := "the catalog says " + tc.code
		url := fakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if tc.retryHdr {
				w.Header().Set("Retry-After", "1")
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"` + text + `","code":"` + tc.code + `"}`))
		})
		c := openTest(t, url, Config{})
		_, getErr := c.Get(context.Background(), "some-id")
		_, hbErr := c.Heartbeat(context.Background(), "some-id")
		_, watchErr := c.Watch(context.Background(), switchboard.Query{})
		for what, err := range map[string]error{"get": getErr, "heartbeat": hbErr, "watch": watchErr} {
			if err == nil || !strings.Contains(err.Error(), text) {
				t.Errorf("%s, code %s: %v; want the server's text %q", what, tc.code, err, text)
				continue
			}
			for _, want := range tc.is {
				if !errors.Is(err, want) {
					t.Errorf("%s, code %s: %v is not %v", what, tc.code, err, want)
				}
			}
			for _, unwanted := range tc.not {
				if errors.Is(err, unwanted) {
					t.Errorf("%s, code %s: %v is %v", what, tc.code, err, unwanted)
				}
			}
		}
	}
}
