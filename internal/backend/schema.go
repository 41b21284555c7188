package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Schema compatibility. Every catalog records, beside its schema version,
// its compat version: the oldest schema version whose programs may still
// read and write it. A migration is either additive (new tables, columns
// with defaults, triggers every writer runs: a program of the previous
// version keeps working on the new schema) and leaves the compat version
// alone, or exclusive (it changes what an older program reads or writes)
// and raises the compat version to its own. A program that knows schema
// versions up to k opens a catalog at version v > k when its compat
// version is at most k, and otherwise refuses before writing anything.

// CompatVersion is the compat version of a schema at version v, given
// which migrations are exclusive: the highest exclusive migration up to v,
// at least 1.
func CompatVersion(v int, exclusive map[int]bool) int {
	c := 1
	for m := range exclusive {
		if m <= v && m > c {
			c = m
		}
	}
	return c
}

// CheckSchema decides whether a program that knows schema versions up to
// known may use a catalog at version v whose compat version is compat (0:
// not recorded, the catalog was written by a program from before compat
// versions, or by one that lost the record). It returns nil when v ≤ known
// (the program migrates it or uses it as it is) or when compat ≤ known,
// and otherwise the one-line error an operator acts on.
func CheckSchema(v, known, compat int) error {
	if v <= known {
		return nil
	}
	if compat == 0 {
		return fmt.Errorf("this catalog's schema is version %d, written by a newer switchboard; this program knows up to %d and the catalog records no compatible version: upgrade switchboard", v, known)
	}
	if compat > known {
		return fmt.Errorf("this catalog's schema is version %d, written by a newer switchboard; this program knows up to %d and the catalog needs at least %d: upgrade switchboard", v, known, compat)
	}
	return nil
}

// OlderWriters is an exclusive migration that may not run yet: Count live
// rows (IDs: some of them) were registered by programs that know only
// schema versions below Migration, which would go on writing beside it
// unaware (they checked the schema when they opened the catalog).
type OlderWriters struct {
	Migration int
	Count     int
	IDs       []string
}

func (e *OlderWriters) Error() string {
	return fmt.Sprintf("schema migration %d needs exclusive use of the catalog: %d live instances (%s) were registered "+
		"by older switchboard releases, which cannot run beside it; stop or upgrade them (or let them expire)",
		e.Migration, e.Count, strings.Join(e.IDs, ", "))
}

// ExclusiveRetry is how often AwaitExclusive tries an exclusive migration
// again while older writers are live.
var ExclusiveRetry = time.Second

// AwaitExclusive runs step, one migration's transaction, until it returns
// anything but an *OlderWriters: the exclusive migration waits, rather
// than racing the older releases' processes, until their rows are gone.
// Each wait is logged at WARN (the first, then every 30 s) with what it
// waits for; the end of ctx ends the wait with the last OlderWriters.
func AwaitExclusive(ctx context.Context, log *slog.Logger, step func() error) error {
	var logged time.Time
	for {
		err := step()
		var ow *OlderWriters
		if !errors.As(err, &ow) {
			return err
		}
		if time.Since(logged) >= 30*time.Second {
			log.Warn("waiting to migrate: "+ow.Error(), "migration", ow.Migration, "instances", ow.Count)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, context.Cause(ctx))
		case <-time.After(ExclusiveRetry):
		}
	}
}
