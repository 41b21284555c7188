package postgres

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// TestMetadataOfAnotherToolIsRead: a row whose metadata another tool wrote
// in another form than an object of strings must not fail every read. Its
// values that are not strings are read as their JSON text, null values are
// left out, a document that is not an object is no metadata; List, Get,
// a snapshot and a watcher reading the change log all read it so, and the
// handle logs it once.
func TestMetadataOfAnotherToolIsRead(t *testing.T) {
	ctx := ctxT(t)
	dsn := pgtest.Schema(t, testDSN)
	var logs testkit.SyncBuffer
	c := openDSN(t, dsn, switchboard.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	reg := func(name string) switchboard.Instance {
		in := inst(name, "127.0.0.1:7000")
		in.Metadata = map[string]string{"zone": "a"}
		out, err := c.Register(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	good, odd, notObject := reg("good"), reg("odd"), reg("not-object")
	events, err := c.Watch(ctx, switchboard.Query{All: true})
	if err != nil {
		t.Fatal(err)
	}
	ws := testkit.NewWatchSet(events)
	ws.WaitForSet(t, "the registered rows", func() string { return testkit.JoinIDs([]switchboard.Instance{good, notObject, odd}) })

	// Another tool rewrites two rows and logs the change as this package
	// would (an entry, a notification), so the watcher reads them.
	exec(t, conn, `UPDATE instances SET metadata = '{"zone": "a", "port": 8080, "tls": true, "o": {"x": [1, 2]}, "gone": null}' WHERE id = $1`, odd.ID)
	exec(t, conn, `UPDATE instances SET metadata = '["x", 1]' WHERE id = $1`, notObject.ID)
	exec(t, conn, `INSERT INTO changes (id, op) VALUES ($1, 'upsert'), ($2, 'upsert')`, odd.ID, notObject.ID)
	exec(t, conn, `SELECT pg_notify($1, '')`, Channel)

	testkit.CheckForeignMetadata(t, ctx, c, func() switchboard.Catalog { return openDSN(t, dsn, switchboard.Options{}) }, ws, &logs, good.ID, odd.ID, notObject.ID)
}
