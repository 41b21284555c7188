package sqlite

import (
	"log/slog"
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
	c, path, logs := openWarnLogged(t)

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

	testkit.CheckForeignMetadata(t, ctx, c, func() switchboard.Catalog { return openPolling(t, path, time.Hour) }, ws, logs, good.ID, odd.ID, notObject.ID)
}

// TestCheckOfAnotherToolIsRead: a row whose check another tool wrote in a
// form that does not read as a check must not fail every read either (as
// on PostgreSQL): List and Get read it as no check, the other rows as
// stored, and the handle logs it once.
func TestCheckOfAnotherToolIsRead(t *testing.T) {
	ctx := tctx(t)
	c, path, logs := openWarnLogged(t)
	check := &switchboard.Check{Target: "tcp://127.0.0.1:1", Interval: time.Second}
	for _, id := range []string{"good", "odd", "not-object"} {
		in := sample(id)
		in.Check = check
		mustRegister(t, c, in)
	}
	raw := rawDB(t, path, "_pragma=busy_timeout(5000)")
	for _, stmt := range []string{
		`UPDATE instances SET check_spec = '{"interval": 5}' WHERE id = 'odd'`,
		`UPDATE instances SET check_spec = '[]' WHERE id = 'not-object'`,
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	wantCheck := func(how string, in switchboard.Instance) {
		t.Helper()
		if in.ID == "good" {
			if in.Check == nil || in.Check.Target != check.Target {
				t.Fatalf("%s: good's check %+v, want it as stored", how, in.Check)
			}
		} else if in.Check != nil {
			t.Fatalf("%s: %s's check %+v, want none", how, in.ID, in.Check)
		}
	}
	list, err := c.List(ctx, switchboard.Query{All: true})
	if err != nil || len(list) != 3 {
		t.Fatalf("List: %+v %v", list, err)
	}
	for _, in := range list {
		wantCheck("List", in)
	}
	for _, id := range []string{"good", "odd", "not-object"} {
		in, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		wantCheck("Get", in)
	}
	if n := strings.Count(logs.String(), "does not read as a check"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
}

// openWarnLogged opens a new catalog file whose handle logs its warnings
// to the buffer returned.
func openWarnLogged(t *testing.T) (*Catalog, string, *testkit.SyncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.db")
	logs := &testkit.SyncBuffer{}
	opts := quiet
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := Open(tctx(t), fileDSN(path), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path, logs
}
