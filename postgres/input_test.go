package postgres

import (
	"errors"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// TestUnstorableKeys: an id, name, type or capability holding a NUL byte or
// invalid UTF-8 (text PostgreSQL cannot hold, so no row has it) names
// nothing: Get and Deregister say ErrNotFound and List finds no row, as on
// SQLite, instead of failing with the server's encoding error (which an
// HTTP front end would report as a server failure).
func TestUnstorableKeys(t *testing.T) {
	c, _, _ := newCatalog(t)
	ctx := ctxT(t)
	in, err := c.Register(ctx, inst("keep", "127.0.0.1:1", "cap"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"a\x00b", "a\xffb", "\x00", in.ID + "\x00"} {
		if _, err := c.Get(ctx, bad); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", bad, err)
		}
		if err := c.Deregister(ctx, bad); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("Deregister(%q): %v, want ErrNotFound", bad, err)
		}
		for _, q := range []switchboard.Query{{Name: bad}, {Type: bad}, {Capability: bad, All: true}} {
			got, err := c.List(ctx, q)
			if err != nil || len(got) != 0 {
				t.Errorf("List(%+v) = %v, %v; want no rows", q, got, err)
			}
		}
	}
	if got, err := c.Get(ctx, in.ID); err != nil || got.ID != in.ID {
		t.Fatalf("the stored row: %+v %v", got, err)
	}
}
