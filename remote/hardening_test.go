package remote_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/remote"
)

// TestDotIDs: "." and ".." are valid ids (switchboard.ValidateID), so a
// client may register them; it must also be able to read and deregister
// them, not reach another endpoint through a dot segment of the URL.
func TestDotIDs(t *testing.T) {
	ctx := context.Background()
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	c := client(t, url, remote.Config{})
	for _, id := range []string{".", ".."} {
		in := inst("dots")
		in.ID = id
		mustRegister(t, c, in)
		if got, err := c.Get(ctx, id); err != nil || got.ID != id {
			t.Fatalf("get %q: %+v %v", id, got, err)
		}
		if err := c.Deregister(ctx, id); err != nil {
			t.Fatalf("deregister %q: %v", id, err)
		}
		if _, err := cat.Get(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("row %q still stored after its deregistration: %v", id, err)
		}
		if _, err := c.Get(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("get %q after deregistration: %v", id, err)
		}
	}
}

// TestReapNegativeAge: a negative age is ErrInvalid, as on every backend,
// not a default reap (rows stale for twice their TTL deleted).
func TestReapNegativeAge(t *testing.T) {
	ctx := context.Background()
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	c := client(t, url, remote.Config{})
	if _, err := cat.Reap(ctx, -time.Second); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("the backend itself: %v", err)
	}
	if n, err := c.Reap(ctx, -time.Second); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("reap of a negative age through the server: %d, %v; want ErrInvalid", n, err)
	}
}

// TestWatchDetectsADeadConnection: a watch whose connection goes silent
// (the server sends a keep-alive every KeepAlive, yet nothing arrives) is
// a lost stream: the watcher hears an error and the watch reconnects and
// resumes, instead of waiting forever on a dead connection while its
// caller believes the topology current.
func TestWatchDetectsADeadConnection(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{KeepAlive: 100 * time.Millisecond})
	bh := testkit.NewProxy(t, strings.TrimPrefix(url, "http://"))
	writer := client(t, url, remote.Config{})
	watcher := client(t, "http://"+bh.Addr(), remote.Config{WatchIdleTimeout: 2 * time.Second})
	mustRegister(t, writer, inst("a"))
	w := watchAll(t, watcher)
	if got := w.untilSynced(); len(got) != 1 {
		t.Fatalf("snapshot: %v", got)
	}
	bh.Freeze()
	if ev := w.next(); ev.Kind != switchboard.EventError {
		t.Fatalf("want an error event for the dead connection, got %+v", ev)
	}
	b := mustRegister(t, writer, inst("b"))
	bh.Restore()
	for {
		ev := w.next()
		if ev.Kind == switchboard.EventAdded && ev.Instance.ID == b.ID {
			break
		}
		if ev.Kind == switchboard.EventAdded || ev.Kind == switchboard.EventRemoved || ev.Kind == switchboard.EventUpdated {
			t.Fatalf("after the reconnection: %+v", ev)
		}
	}
}

// TestWatchRacesClose: watches opened while the client closes either fail
// with ErrClosed or end with Close; Close returns only once every watch it
// ended has stopped (no watch goroutine outlives it, no WaitGroup reuse).
func TestWatchRacesClose(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	for round := 0; round < 20; round++ {
		c, err := remote.Open(context.Background(), url, remote.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		chans := make(chan (<-chan switchboard.Event), 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ch, err := c.Watch(context.Background(), switchboard.Query{})
				if err != nil {
					return // closed, or cancelled by Close mid-connect
				}
				chans <- ch
			}()
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		c.Close()
		wg.Wait()
		close(chans)
		for ch := range chans {
			// Close has returned: every watch channel is closed, so this
			// drains without blocking for long.
			for range ch {
			}
		}
	}
}

// TestInvalidUTF8IsRefusedNotReplaced: JSON carries invalid UTF-8 as
// U+FFFD, so the server would store a value the caller never gave; the
// client refuses what every backend refuses, before sending, and the
// backend holds nothing.
func TestInvalidUTF8IsRefusedNotReplaced(t *testing.T) {
	ctx := context.Background()
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	c := client(t, url, remote.Config{})
	for name, in := range map[string]switchboard.Instance{
		"metadata value": {Name: "utf", Type: "t", Address: "127.0.0.1:1", TTL: time.Minute, Metadata: map[string]string{"k": "a\xffb"}},
		"metadata key":   {Name: "utf", Type: "t", Address: "127.0.0.1:1", TTL: time.Minute, Metadata: map[string]string{"k\xff": "v"}},
		"version":        {Name: "utf", Type: "t", Address: "127.0.0.1:1", TTL: time.Minute, Version: "1\xff"},
	} {
		_, direct := cat.Register(ctx, in)
		_, err := c.Register(ctx, in)
		if !errors.Is(direct, switchboard.ErrInvalid) || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("%s: backend %v, remote %v; want ErrInvalid from both", name, direct, err)
		}
	}
	if all, err := cat.List(ctx, switchboard.Query{All: true}); err != nil || len(all) != 0 {
		t.Fatalf("stored: %+v %v", all, err)
	}
}

// TestHeartbeatWithAForeignID: a client's registration expired and another
// client registered its id again (a fixed id, configured twice). The first
// client's next heartbeat, of all its registrations, must renew the others
// and report the lost one missing (so its Bootstrap says so), not fail
// whole and let every registration of the process expire.
func TestHeartbeatWithAForeignID(t *testing.T) {
	ctx := context.Background()
	cat := testkit.OpenSQLite(t)
	url, _ := serve(t, cat, httpapi.Options{})
	first, second := client(t, url, remote.Config{}), client(t, url, remote.Config{})
	mine := mustRegister(t, first, inst("mine"))
	lost := inst("lost")
	lost.ID, lost.TTL = "fixed-id", 300*time.Millisecond
	mustRegister(t, first, lost)
	testkit.WaitUntil(t, "the lost registration to expire", func() bool {
		got, _ := cat.List(ctx, switchboard.Query{Name: "lost"})
		return len(got) == 0
	})
	taken := lost
	taken.TTL = time.Hour
	// An expired row: anyone may take the id, once the server's mirror,
	// which checks ownership, has seen the expiry too.
	testkit.WaitUntil(t, "the second client to take the expired id", func() bool {
		_, err := second.Register(ctx, taken)
		return err == nil
	})
	before, err := cat.Get(ctx, mine.ID)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // let the catalog's clock move
	missing, err := first.Heartbeat(ctx, mine.ID, lost.ID)
	if err != nil || !slices.Equal(missing, []string{lost.ID}) {
		t.Fatalf("heartbeat: missing %v, %v; want [%s] missing and no error", missing, err, lost.ID)
	}
	after, err := cat.Get(ctx, mine.ID)
	if err != nil || !after.LastSeen.After(before.LastSeen) {
		t.Fatalf("the client's other registration was not renewed: %v -> %v (%v)", before.LastSeen, after.LastSeen, err)
	}
	if _, err := second.Heartbeat(ctx, lost.ID); err != nil {
		t.Fatalf("the new owner's heartbeat: %v", err)
	}
}
