package catalogtest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// MultiGet checks a catalog's GetMany: the rows of the ids named, stale
// ones included, each once however often named; ids without a row are
// absent; more than MaxHeartbeatIDs ids are refused.
func MultiGet(t *testing.T, c interface {
	switchboard.Catalog
	switchboard.MultiGetter
}) {
	t.Helper()
	ctx := t.Context()
	for i := range 3 {
		if _, err := c.Register(ctx, switchboard.Instance{ID: fmt.Sprintf("gm-%d", i), Name: "gm", Type: "t", Address: "127.0.0.1:1",
			TTL: time.Hour, Metadata: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Register(ctx, switchboard.Instance{ID: "gm-stale", Name: "gm", Type: "t", Address: "127.0.0.1:1", TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the 1 ms TTL: stale
	got, err := c.GetMany(ctx, []string{"gm-0", "nope", "gm-2", "gm-0", "gm-stale"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range got {
		names = append(names, in.ID)
		if in.ID == "gm-0" && in.Metadata["k"] != "v" {
			t.Errorf("gm-0 read without its metadata: %+v", in)
		}
		if in.ID == "gm-stale" && !in.Stale {
			t.Errorf("gm-stale read as active")
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"gm-0", "gm-2", "gm-stale"}) {
		t.Fatalf("GetMany: %v", names)
	}
	many := make([]string, switchboard.MaxHeartbeatIDs)
	for i := range many {
		many[i] = fmt.Sprintf("x-%d", i)
	}
	many[9999] = "gm-1"
	if got, err := c.GetMany(ctx, many); err != nil || len(got) != 1 || got[0].ID != "gm-1" {
		t.Fatalf("GetMany of 10,000 ids: %d rows, %v", len(got), err)
	}
	if _, err := c.GetMany(ctx, append(many, "one-more")); err == nil {
		t.Fatal("GetMany of 10,001 ids: no error")
	}
}

// LeaseReading checks a LeaseReader: one lease by name (not found for none), pages by name
// after a given one, and the count of lease rows, released ones included.
func LeaseReading(t *testing.T, c interface {
	switchboard.Leaser
	switchboard.LeaseReader
}) {
	t.Helper()
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
