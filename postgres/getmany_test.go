package postgres

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
)

// TestGetMany: the rows of the ids named, stale ones included, each once
// however often named; ids without a row are absent; more than
// MaxHeartbeatIDs ids are refused.
func TestGetMany(t *testing.T) {
	c, _, _ := newCatalog(t)
	ctx := t.Context()
	var ids []string
	for i := range 3 {
		in, err := c.Register(ctx, switchboard.Instance{ID: fmt.Sprintf("gm-%d", i), Name: "gm", Type: "t", Address: "127.0.0.1:1",
			TTL: time.Hour, Metadata: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
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
