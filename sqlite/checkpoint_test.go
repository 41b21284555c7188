package sqlite

import (
	"fmt"
	"os"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// With SQLite's automatic checkpoint off, the checkpointer alone copies the
// WAL back: after each round of writes it catches up, the next writer
// starts the WAL over, and the WAL file stays the size of one round instead
// of growing with every round (without the checkpointer it grows
// threefold here, and the wait for it never ends).
func TestCheckpointerKeepsTheWALSmall(t *testing.T) {
	c, path := newFile(t)
	var first int64
	for round := range 3 {
		for i := range 1500 {
			in := switchboard.Instance{ID: fmt.Sprintf("ck-%d-%d", round, i), Name: "ck", Type: "svc",
				Address: fmt.Sprintf("10.0.%d.%d:80", i/250, i%250), Capabilities: []string{"a", fmt.Sprintf("c%d", i%50)}}
			if _, err := c.Register(tctx(t), in); err != nil {
				t.Fatal(err)
			}
		}
		testkit.WaitUntil(t, "the checkpointer to cover every commit", func() bool {
			d, done := c.use()
			defer done()
			return c.checkpointed.Load() == d.wlock.commits.Load()
		})
		st, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			first = st.Size()
			continue
		}
		if st.Size() > first*3/2 {
			t.Fatalf("round %d: WAL %d bytes, %d after the first round: not started over", round, st.Size(), first)
		}
	}
}
