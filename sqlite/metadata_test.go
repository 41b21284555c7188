package sqlite

import (
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestMetadataOfAnotherToolIsRead: a row whose metadata another tool wrote
// in another form than an object of strings must not fail every read (as
// on PostgreSQL). Its values that are not strings are read as their JSON
// text, null values are left out, a document that is not an object is no
// metadata; List, Get, a snapshot and a watcher reading the change log
// all read it so, and the handle logs it once.
func TestMetadataOfAnotherToolIsRead(t *testing.T) {
	ctx := tctx(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	var logs testkit.SyncBuffer
	opts := quiet
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := Open(ctx, fileDSN(path), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	good, odd, notObject := mustRegister(t, c, sample("good")), mustRegister(t, c, sample("odd")), mustRegister(t, c, sample("not-object"))
	events, err := c.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	ws := testkit.NewWatchSet(events)
	ws.WaitForSet(t, "the registered rows", func() string { return testkit.JoinIDs([]switchboard.Instance{good, notObject, odd}) })

	// Another tool rewrites two rows (the triggers pack them) and logs the
	// change as this package would, so the watcher reads them.
	raw := rawDB(t, path, "_pragma=busy_timeout(5000)")
	for _, stmt := range []string{
		`UPDATE instances SET metadata = '{"zone": "a", "port": 8080, "tls": true, "o": {"x": [1, 2]}, "gone": null}' WHERE id = 'odd'`,
		`UPDATE instances SET metadata = '["x", 1]' WHERE id = 'not-object'`,
		`INSERT INTO changes (id, op, reason, at) VALUES ('odd', 'upsert', '', ` + nowSQL + `), ('not-object', 'upsert', '', ` + nowSQL + `)`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	wantOdd := map[string]string{"zone": "a", "port": "8080", "tls": "true", "o": `{"x":[1,2]}`}
	check := func(how string, got []switchboard.Instance) {
		t.Helper()
		if len(got) != 3 {
			t.Fatalf("%s: %d instances, want 3: %+v", how, len(got), got)
		}
		for _, in := range got {
			want := map[string]string{"zone": "a"}
			switch in.ID {
			case odd.ID:
				want = wantOdd
			case notObject.ID:
				want = map[string]string{}
			}
			if !maps.Equal(in.Metadata, want) {
				t.Errorf("%s: %s has metadata %#v, want %#v", how, in.ID, in.Metadata, want)
			}
		}
	}
	for range 2 {
		got, err := c.List(ctx, switchboard.Query{All: true})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		check("List", got)
	}
	var gets []switchboard.Instance
	for _, id := range []string{good.ID, odd.ID, notObject.ID} {
		in, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		gets = append(gets, in)
	}
	check("Get", gets)
	testkit.WaitUntil(t, "the watcher to read the rewritten rows", func() bool {
		in, ok := ws.Get(odd.ID)
		return ok && maps.Equal(in.Metadata, wantOdd)
	})
	if in, _ := ws.Get(notObject.ID); len(in.Metadata) != 0 {
		t.Errorf("watcher: %s has metadata %#v, want none", notObject.ID, in.Metadata)
	}

	// A snapshot of another handle reads them the same.
	other := openPolling(t, path, time.Hour)
	snap, err := other.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	var initial []switchboard.Instance
	for ev := range snap {
		if ev.Kind == switchboard.EventSynced {
			break
		}
		initial = append(initial, ev.Instance)
	}
	check("snapshot", initial)

	if n := strings.Count(logs.String(), "written by another tool"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("not a warning:\n%s", logs.String())
	}
}
