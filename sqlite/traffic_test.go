package sqlite_test

import (
	"context"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/catalogtest"
)

// TestTrafficSmoke: weight, zone, a check and drain round-trip through a
// file; a re-registration keeps the drained state.
func TestTrafficSmoke(t *testing.T) {
	ctx := context.Background()
	c := openFile(t)
	in := switchboard.Instance{ID: "a", Name: "svc", Type: "writer", Address: "127.0.0.1:1", Weight: 300, Zone: "z1"}
	got, err := c.Register(ctx, in)
	if err != nil || got.Weight != 300 || got.Zone != "z1" || got.Draining || got.Status() != switchboard.StatusPassing {
		t.Fatalf("register: %+v, %v", got, err)
	}
	d, err := c.Drain(ctx, "a", true)
	if err != nil || !d.Draining || d.Revision <= got.Revision {
		t.Fatalf("drain: %+v, %v", d, err)
	}
	again, err := c.Register(ctx, in)
	if err != nil || !again.Draining {
		t.Fatalf("re-register lost the drain: %+v, %v", again, err)
	}
	g, err := c.Get(ctx, "a")
	if err != nil || !g.Draining || g.Weight != 300 || g.Zone != "z1" {
		t.Fatalf("get: %+v, %v", g, err)
	}
	l, err := c.List(ctx, switchboard.Query{})
	if err != nil || len(l) != 1 || !l[0].Draining {
		t.Fatalf("list: %+v, %v", l, err)
	}
}

// TestTrafficConformance runs the shared traffic-state suite (weights,
// zones, drain, check results), each case on a fresh file.
func TestTrafficConformance(t *testing.T) {
	catalogtest.Traffic(t, func(t *testing.T) switchboard.Catalog { return openFile(t) })
}
