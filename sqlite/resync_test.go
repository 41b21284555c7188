package sqlite

import (
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// A change that bypasses the change log (another program writing the file
// with plain SQL: no log entry, no announcement) reaches watchers through
// the periodic resync, which reads this backend's snapshot as a stream
// and reconciles each part as it comes, decoding only the rows whose
// digest (packed form and components) differs from the mirror's; what the
// log did bring is kept.
func TestResyncRepairsWhatTheLogMissed(t *testing.T) {
	path := t.TempDir() + "/catalog.db"
	c := openPolling(t, path, 200*time.Millisecond)
	for _, id := range []string{"kept", "changed", "deleted", "parts"} {
		mustRegister(t, c, sample(id))
	}
	w, err := c.Watch(tctx(t), switchboard.Query{})
	if err != nil {
		t.Fatal(err)
	}
	set := testkit.NewWatchSet(w)
	set.WaitForSet(t, "the first snapshot", func() string { return "changed deleted kept parts" })
	// A first resync learns the rows' digests; the ones after it decode
	// only what differs.
	h, err := c.watchHub()
	if err != nil {
		t.Fatal(err)
	}
	h.Resync()

	raw := rawDB(t, path, "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)")
	for _, stmt := range []string{
		`UPDATE instances SET version = 'behind-the-log' WHERE id = 'changed'`,
		`DELETE FROM instances WHERE id = 'deleted'`,
		`UPDATE instances SET components = '{"behind":"the-log"}' WHERE id = 'parts'`, // not in packed
	} {
		if _, err := raw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	testkit.WaitUntil(t, "the resync to repair the watcher's set", func() bool {
		in, ok := set.Get("changed")
		p, _ := set.Get("parts")
		return set.IDs() == "changed kept parts" && ok && in.Version == "behind-the-log" &&
			string(p.Components) == `{"behind":"the-log"}`
	})
	if in, _ := set.Get("kept"); in.Version != sample("kept").Version {
		t.Errorf("kept's version %q, want %q", in.Version, sample("kept").Version)
	}
	// The log goes on as before.
	mustRegister(t, c, sample("after"))
	set.WaitForSet(t, "a registration after the repair", func() string { return "after changed kept parts" })
}
