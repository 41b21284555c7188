package sqlite

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// fileCheckEvery is how often, at most, a file catalog checks that its path
// still names the file it has open: within one default heartbeat interval
// (3 s). The heartbeat that runs the check renews in the file it finds, so
// its registrations are back at once.
//
// The check rides on the handle's own operations (each takes the database
// through opening, which runs it when it is due), and only a handle with
// watchers, which must notice a replaced file even when it does nothing
// else, runs it on a ticker too. A ticker in every handle woke every
// process that had the file open once a second for one stat: in a fleet of
// 200 processes that each renew once a second, the 200 extra wake-ups cost
// 0.09–0.25 of the fleet's 0.5–0.65 cores on this project's virtual
// machine (each wake-up of an idle Go process also wakes the runtime's
// monitor thread).
const fileCheckEvery = time.Second

// fileCheck is the state of the file identity check.
type fileCheck struct {
	mu     sync.Mutex   // held by the check under way
	last   atomic.Int64 // when the last check began (Unix ns; Open counts as one)
	warned bool         // the deletion or replacement was logged (guarded by mu)
}

// checkFileDue runs the identity check (see checkFile) when fileCheckEvery
// has passed since the last one began; while another caller runs it, it
// returns at once. A no-op for an in-memory catalog and a MustExist one,
// which does not reopen.
func (c *Catalog) checkFileDue(ctx context.Context) {
	if !c.checksFile {
		return
	}
	now := time.Now().UnixNano()
	if now-c.fc.last.Load() < int64(c.fileCheckEvery) || !c.fc.mu.TryLock() {
		return
	}
	defer c.fc.mu.Unlock()
	if now-c.fc.last.Load() < int64(c.fileCheckEvery) {
		return
	}
	c.fc.last.Store(now)
	c.checkFile(ctx)
}

// watchFile starts the ticker of the file identity check, for a handle
// with watchers.
func (c *Catalog) watchFile() *detector {
	return every(c.fileCheckEvery, c.checkFileDue)
}

// every runs fn every period in a goroutine of its own until the returned
// detector is stopped.
func every(period time.Duration, fn func(ctx context.Context)) *detector {
	return background(func(ctx context.Context) {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			fn(ctx)
		}
	})
}

// background runs loop in a goroutine of its own until the returned
// detector is stopped (its ctx ends; stop waits for it to return).
func background(loop func(ctx context.Context)) *detector {
	ctx, cancel := context.WithCancel(context.Background())
	d := &detector{cancel: cancel}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		loop(ctx)
	}()
	return d
}

// checkFile compares the identity (device, inode) of the file the path
// names with the one this catalog has open (run by checkFileDue, under
// c.fc.mu). When the file was deleted (`rm .data/switchboard.db*`) or
// replaced (a restored copy moved into place), the process would go on
// writing to a file nobody else reads: it logs a warning, once, and opens
// the path again (see reopen); a failed reopen is retried at the next
// check.
func (c *Catalog) checkFile(ctx context.Context) {
	d, done := c.use()
	open := d.id
	done()
	now, err := statID(c.path)
	if err == nil && now == open {
		return
	}
	what := "replaced"
	if errors.Is(err, os.ErrNotExist) {
		what = "deleted"
	} else if err != nil {
		c.log.Debug("sqlite: cannot check the catalog file", "db", c.path, "err", err)
		return
	}
	if !c.fc.warned {
		c.fc.warned = true
		c.log.Warn("sqlite: the catalog file was "+what+" while open; opening the path again (registrations are written again at their next heartbeat)",
			"db", c.path)
	}
	if err := c.reopen(ctx); err != nil {
		if ctx.Err() == nil {
			c.log.Debug("sqlite: reopen failed; retrying", "db", c.path, "err", err)
		}
		return
	}
	c.fc.warned = false
	c.log.Info("sqlite: catalog file reopened", "db", c.path)
}

// reopen opens the path again (creating the file and its schema when it
// is missing, as Open does), switches every later operation to it, and
// closes the old opening once the operations using it are done. Watchers
// resync: the new file is another history (its epoch differs, or its log
// is behind their cursor), so the hub diffs a snapshot. Bootstraps find
// their rows missing at their next heartbeat and register again.
func (c *Catalog) reopen(ctx context.Context) error {
	nd, err := c.openFile(false)
	if err != nil {
		return err
	}
	if err := c.migrate(ctx, nd, false); err != nil {
		nd.close()
		return err
	}
	c.fileMu.Lock()
	if c.closed.Load() {
		c.fileMu.Unlock()
		nd.close()
		return errClosed("reopen")
	}
	old := c.d
	c.d = nd
	c.fileMu.Unlock()
	if err := old.close(); err != nil {
		c.log.Debug("sqlite: closing the replaced file", "err", err)
	}
	c.mu.Lock()
	h := c.hub
	if c.detector != nil && h != nil {
		// The data_version poller and the directory watch follow the new
		// file (the directory may have been re-created too).
		c.detector.stop()
		c.detector = c.detect(h.Notify)
	}
	c.mu.Unlock()
	if h != nil {
		h.Notify()
	}
	return nil
}

// where names the database in errors and logs.
func (c *Catalog) where() string {
	if c.path == "" {
		return ":memory:"
	}
	return c.path
}
