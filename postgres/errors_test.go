package postgres

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestErrorsQuoteIDs: ids, lease names and holders are quoted (%q) in the
// errors that name them, control characters and NUL included (as on
// SQLite), so that no input can break a log line or a terminal.
func TestErrorsQuoteIDs(t *testing.T) {
	c, _, _ := newCatalog(t)
	ctx := ctxT(t)
	for _, id := range []string{"a\x00b\nc\x1b[31m", "a\nb"} {
		_, err := c.Get(ctx, id)
		testkit.CheckQuotedError(t, "Get", err, switchboard.ErrNotFound, id)
		testkit.CheckQuotedError(t, "Deregister", c.Deregister(ctx, id), switchboard.ErrNotFound, id)
	}
	const name, holder, other = "lease\nname", "holder\x1b[0m", "other\tholder"
	l, err := c.Acquire(ctx, name, holder, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, name, other, time.Minute)
	testkit.CheckQuotedError(t, "Acquire held", err, switchboard.ErrLeaseHeld, name, holder)
	stale := l
	stale.Token++
	_, err = c.Renew(ctx, stale)
	testkit.CheckQuotedError(t, "Renew lost", err, switchboard.ErrLeaseLost, name, holder)
	testkit.CheckQuotedError(t, "Release lost", c.Release(ctx, stale), switchboard.ErrLeaseLost, name, holder)
}
