package postgres

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestErrorsQuoteIDs: ids, lease names and holders are quoted (%q) in the
// errors that name them, control characters and NUL included (as on
// SQLite), so that no input can break a log line or a terminal.
func TestErrorsQuoteIDs(t *testing.T) {
	c, _, _ := newCatalog(t)
	ctx := ctxT(t)
	check := func(what string, err error, want error, names ...string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if strings.IndexFunc(err.Error(), func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			t.Errorf("%s: error holds a raw control character: %q", what, err.Error())
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), strconv.Quote(n)) {
				t.Errorf("%s: error %q does not name %s quoted", what, err.Error(), strconv.Quote(n))
			}
		}
	}
	for _, id := range []string{"a\x00b\nc\x1b[31m", "a\nb"} {
		_, err := c.Get(ctx, id)
		check("Get", err, switchboard.ErrNotFound, id)
		check("Deregister", c.Deregister(ctx, id), switchboard.ErrNotFound, id)
	}
	const name, holder, other = "lease\nname", "holder\x1b[0m", "other\tholder"
	l, err := c.Acquire(ctx, name, holder, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, name, other, time.Minute)
	check("Acquire held", err, switchboard.ErrLeaseHeld, name, holder)
	stale := l
	stale.Token++
	_, err = c.Renew(ctx, stale)
	check("Renew lost", err, switchboard.ErrLeaseLost, name, holder)
	check("Release lost", c.Release(ctx, stale), switchboard.ErrLeaseLost, name, holder)
}
