package sqlite

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestErrorsQuoteIDs: ids, lease names and holders are quoted (%q) in the
// errors that name them, control characters and NUL included.
func TestErrorsQuoteIDs(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	const id = "a\x00b\nc\x1b[31m"
	_, err := c.Get(ctx, id)
	testkit.CheckQuotedError(t, "Get", err, switchboard.ErrNotFound, id)
	testkit.CheckQuotedError(t, "Deregister", c.Deregister(ctx, id), switchboard.ErrNotFound, id)

	const name, holder, other = "lease\nname", "holder\x1b[0m", "other\tholder"
	l, err := c.Acquire(ctx, name, holder, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, name, other, time.Minute)
	testkit.CheckQuotedError(t, "Acquire held", err, switchboard.ErrLeaseHeld, name, other, holder)
	stale := l
	stale.Token++
	_, err = c.Renew(ctx, stale)
	testkit.CheckQuotedError(t, "Renew lost", err, switchboard.ErrLeaseLost, name, holder)
	testkit.CheckQuotedError(t, "Release lost", c.Release(ctx, stale), switchboard.ErrLeaseLost, name, holder)
	_, err = c.Acquire(ctx, name, other, 0)
	testkit.CheckQuotedError(t, "Acquire invalid TTL", err, switchboard.ErrInvalid, name)

	c.Close()
	_, err = c.Get(ctx, id)
	testkit.CheckQuotedError(t, "Get after Close", err, switchboard.ErrClosed, id)
	testkit.CheckQuotedError(t, "Deregister after Close", c.Deregister(ctx, id), switchboard.ErrClosed, id)
	_, err = c.Register(ctx, sample("closed-1"))
	testkit.CheckQuotedError(t, "Register after Close", err, switchboard.ErrClosed, "closed-1")
	_, err = c.Acquire(ctx, name, holder, time.Minute)
	testkit.CheckQuotedError(t, "Acquire after Close", err, switchboard.ErrClosed, name)
	_, err = c.Renew(ctx, l)
	testkit.CheckQuotedError(t, "Renew after Close", err, switchboard.ErrClosed, name)
	testkit.CheckQuotedError(t, "Release after Close", c.Release(ctx, l), switchboard.ErrClosed, name)
}
