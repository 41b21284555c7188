package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/postgres/pgtest"
)

// A change that bypasses the change log (plain SQL from another client: no
// log entry, no notification) reaches watchers through the periodic
// resync, which reads this backend's snapshot as a stream and reconciles
// each part as it comes, decoding only the rows whose digest (every column
// but last_seen) differs from the mirror's; a renewal alone is no event;
// what the log did bring is kept.
func TestResyncRepairsWhatTheLogMissed(t *testing.T) {
	dsn := pgtest.Schema(t, testDSN)
	c := openDSN(t, dsn, switchboard.Options{PollInterval: 200 * time.Millisecond})
	for i, id := range []string{"kept", "changed", "deleted", "parts"} {
		reg(t, c, id, fmt.Sprintf("h:%d", i+1))
	}
	r, _, cancel := watchSynced(t, c)
	defer cancel()
	// A first resync learns the rows' digests; the ones after it decode
	// only what differs.
	h, err := c.startHub()
	if err != nil {
		t.Fatal(err)
	}
	h.Resync()

	conn, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctxT(t))
	exec(t, conn, `UPDATE instances SET version = 'behind-the-log' WHERE id = 'changed'`)
	exec(t, conn, `DELETE FROM instances WHERE id = 'deleted'`)
	exec(t, conn, `UPDATE instances SET components = '{"behind":"the-log"}' WHERE id = 'parts'`) // was NULL
	exec(t, conn, `UPDATE instances SET last_seen = now() WHERE id = 'kept'`)
	r.waitFor(t, "the resync's repairs", func(evs []switchboard.Event) bool {
		return has(evs, switchboard.EventRemoved, "deleted") && slices.ContainsFunc(evs, func(ev switchboard.Event) bool {
			return ev.Kind == switchboard.EventUpdated && ev.Instance.ID == "changed" && ev.Instance.Version == "behind-the-log"
		}) && slices.ContainsFunc(evs, func(ev switchboard.Event) bool {
			return ev.Kind == switchboard.EventUpdated && ev.Instance.ID == "parts" && strings.Contains(string(ev.Instance.Components), "the-log")
		})
	})
	want := []string{"added changed", "added deleted", "added kept", "added parts"}
	if got := r.changes(0); !slices.Equal(got[:4], want) || len(got) != 7 ||
		!slices.Equal(slices.Sorted(slices.Values(got[4:])), []string{"removed unknown deleted", "updated changed", "updated parts"}) {
		t.Fatalf("events %q, want %q, then changed and parts updated and deleted removed", got, want)
	}
	// The log goes on as before.
	reg(t, c, "after", "h:9")
	r.waitFor(t, "a registration after the repair", func(evs []switchboard.Event) bool { return has(evs, switchboard.EventAdded, "after") })
}
