package sqlite

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// rawControl reports whether s holds a control character (NUL, a line
// break, an escape sequence's ESC): an error naming an id or a lease must
// quote it, so that no input can break a log line or a terminal.
func rawControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

// TestErrorsQuoteIDs: ids, lease names and holders are quoted (%q) in the
// errors that name them, control characters and NUL included.
func TestErrorsQuoteIDs(t *testing.T) {
	c, _ := newFile(t)
	ctx := tctx(t)
	const id = "a\x00b\nc\x1b[31m"
	check := func(what string, err error, want error, names ...string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if rawControl(err.Error()) {
			t.Errorf("%s: error holds a raw control character: %q", what, err.Error())
		}
		for _, n := range names {
			if !strings.Contains(err.Error(), strconv.Quote(n)) {
				t.Errorf("%s: error %q does not name %s quoted", what, err.Error(), strconv.Quote(n))
			}
		}
	}
	_, err := c.Get(ctx, id)
	check("Get", err, switchboard.ErrNotFound, id)
	check("Deregister", c.Deregister(ctx, id), switchboard.ErrNotFound, id)

	const name, holder, other = "lease\nname", "holder\x1b[0m", "other\tholder"
	l, err := c.Acquire(ctx, name, holder, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, name, other, time.Minute)
	check("Acquire held", err, switchboard.ErrLeaseHeld, name, other, holder)
	stale := l
	stale.Token++
	_, err = c.Renew(ctx, stale)
	check("Renew lost", err, switchboard.ErrLeaseLost, name, holder)
	check("Release lost", c.Release(ctx, stale), switchboard.ErrLeaseLost, name, holder)
	_, err = c.Acquire(ctx, name, other, 0)
	check("Acquire invalid TTL", err, switchboard.ErrInvalid, name)

	c.Close()
	_, err = c.Get(ctx, id)
	check("Get after Close", err, switchboard.ErrClosed, id)
	check("Deregister after Close", c.Deregister(ctx, id), switchboard.ErrClosed, id)
	_, err = c.Register(ctx, sample("closed-1"))
	check("Register after Close", err, switchboard.ErrClosed, "closed-1")
	_, err = c.Acquire(ctx, name, holder, time.Minute)
	check("Acquire after Close", err, switchboard.ErrClosed, name)
	_, err = c.Renew(ctx, l)
	check("Renew after Close", err, switchboard.ErrClosed, name)
	check("Release after Close", c.Release(ctx, l), switchboard.ErrClosed, name)
}
