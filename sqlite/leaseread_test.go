package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestLeaseReader: one lease by name (not found for none), pages by name
// after a given one, and the count of lease rows, released ones included.
func TestLeaseReader(t *testing.T) {
	c, _ := newFile(t)
	ctx := t.Context()
	for i := range 5 {
		if _, err := c.Acquire(ctx, fmt.Sprintf("lr-%d", i), "h", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Lease(ctx, "lr-2")
	if err != nil || l.Name != "lr-2" || l.Holder != "h" || l.Token < 1 || l.TTL != time.Minute {
		t.Fatalf("Lease: %+v %v", l, err)
	}
	if err := c.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Lease(ctx, "lr-2"); err != nil || l.Holder != "" {
		t.Fatalf("a released lease: %+v %v", l, err)
	}
	if _, err := c.Lease(ctx, "nope"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Lease of none: %v", err)
	}
	var names []string
	for after := ""; ; {
		page, err := c.LeasesAfter(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, l := range page {
			names = append(names, l.Name)
		}
		after = page[len(page)-1].Name
	}
	if fmt.Sprint(names) != "[lr-0 lr-1 lr-2 lr-3 lr-4]" {
		t.Fatalf("pages: %v", names)
	}
	if n, err := c.LeaseCount(ctx); err != nil || n != 5 {
		t.Fatalf("LeaseCount: %d %v", n, err)
	}
	if _, err := c.LeasesAfter(ctx, "", 0); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("a page of 0: %v", err)
	}
}
