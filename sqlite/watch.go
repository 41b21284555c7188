package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// dataVersionEvery is the period of the PRAGMA data_version fallback poll.
const dataVersionEvery = 100 * time.Millisecond

// Watch streams the instances selected by q (see switchboard.Catalog). The
// process's one hub is created at the first Watch, together with the
// detection of other processes' writes on a file catalog.
func (c *Catalog) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	h, err := c.watchHub()
	if err != nil {
		return nil, err
	}
	ch, err := h.Watch(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqlite: watch: %w", err)
	}
	return ch, nil
}

var _ switchboard.WatchResumer = (*Catalog)(nil)

// WatchFrom resumes a watch from an Event.Position an earlier watch of this
// catalog delivered; see switchboard.WatchResumer.
func (c *Catalog) WatchFrom(ctx context.Context, q switchboard.Query, position string) (<-chan switchboard.Event, error) {
	h, err := c.watchHub()
	if err != nil {
		return nil, err
	}
	ch, err := h.WatchFrom(ctx, q, position)
	if err != nil {
		return nil, fmt.Errorf("sqlite: watch from %q: %w", position, err)
	}
	return ch, nil
}

func (c *Catalog) watchHub() (*hub.Hub, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, errClosed("watch")
	}
	if c.hub == nil {
		c.hub = hub.New(source{c}, hub.Options{PollInterval: c.opts.PollInterval, Logger: c.log, Resumable: true,
			SelfPreservationThreshold: c.opts.SelfPreservationThreshold, SelfPreservationMin: c.opts.SelfPreservationMin})
		if c.path != "" {
			c.detector = c.detect(c.hub.Notify)
		}
		if c.checksFile {
			c.fileTicker = c.watchFile()
		}
	}
	return c.hub, nil
}

// detector notices commits of other processes: inotify (fsnotify) on the
// commit announcements of Switchboard writers, and PRAGMA data_version
// polled on a connection of its own as the fallback for any other writer.
type detector struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	onFile atomic.Bool // watching the sidecar itself, not its directory (tests)
	id     fileID      // the sidecar watched, while onFile (files' goroutine)
}

// detect starts the detector; notify is called on every sign of a write.
func (c *Catalog) detect(notify func()) *detector {
	ctx, cancel := context.WithCancel(context.Background())
	d := &detector{cancel: cancel}
	signal, dir := c.path+"-wlock", filepath.Dir(c.path)
	if w, err := fsnotify.NewWatcher(); err != nil {
		c.log.Warn("sqlite: file notifications unavailable, relying on data_version polling", "err", err)
	} else if err := d.watch(w, signal, dir); err != nil {
		w.Close()
		c.log.Warn("sqlite: cannot watch the database directory, relying on data_version polling", "dir", dir, "err", err)
	} else {
		d.wg.Add(1)
		go d.files(ctx, c, w, signal, dir, notify)
	}
	d.wg.Add(1)
	go d.dataVersion(ctx, c, notify)
	return d
}

// watch watches the sidecar signal itself when it exists, and else its
// directory dir, where its creation shows.
func (d *detector) watch(w *fsnotify.Watcher, signal, dir string) error {
	if id, err := statID(signal); err == nil {
		if err := w.Add(signal); err == nil {
			d.id = id
			d.onFile.Store(true)
			return nil
		}
	}
	d.onFile.Store(false)
	return w.Add(dir)
}

// rewatch stops watching old and watches the sidecar or its directory
// again (see watch); a failure leaves the data_version poll to notice
// writes.
func (d *detector) rewatch(c *Catalog, w *fsnotify.Watcher, old, signal, dir string) {
	w.Remove(old)
	if err := d.watch(w, signal, dir); err != nil {
		c.log.Warn("sqlite: cannot watch the database directory, relying on data_version polling", "dir", dir, "err", err)
	}
}

func (d *detector) stop() {
	d.cancel()
	d.wg.Wait()
}

// files calls notify whenever a Switchboard writer of the file announces a
// commit (a write to "<db>-wlock", see writeLock). It watches the sidecar
// itself (every Switchboard handle creates it when it opens the file), not
// the directory: a directory watch also woke at each of the WAL's writes,
// twice as often, in every watching process at once. When the sidecar is
// removed or renamed it watches the directory until one is created again.
func (d *detector) files(ctx context.Context, c *Catalog, w *fsnotify.Watcher, signal, dir string, notify func()) {
	defer d.wg.Done()
	defer w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Name != signal {
				continue
			}
			switch {
			case ev.Has(fsnotify.Write):
				notify()
			case ev.Has(fsnotify.Create) && !d.onFile.Load():
				d.rewatch(c, w, dir, signal, dir)
				notify()
			case ev.Has(fsnotify.Remove|fsnotify.Rename|fsnotify.Chmod) && d.onFile.Load():
				// Unlinked while processes still hold it open shows as a
				// change of its attributes (its link count) only.
				if id, err := statID(signal); err == nil && id == d.id {
					continue
				}
				d.rewatch(c, w, signal, signal, dir)
				notify()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events: look at the catalog to be safe.
			c.log.Warn("sqlite: file notification error", "err", err)
			notify()
		}
	}
}

// dataVersion polls PRAGMA data_version on a dedicated connection, whose
// value changes whenever another connection commits, and calls notify when
// it changed.
func (d *detector) dataVersion(ctx context.Context, c *Catalog, notify func()) {
	defer d.wg.Done()
	cur, done := c.use()
	dsn := cur.dsn
	done()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		c.log.Warn("sqlite: data_version poller not started", "err", err)
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("sqlite: data_version poller not started", "err", err)
		}
		return
	}
	defer conn.Close()
	t := time.NewTicker(dataVersionEvery)
	defer t.Stop()
	var last int64
	for first := true; ; first = false {
		var v int64
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.log.Debug("sqlite: data_version poll failed", "err", err)
		} else {
			if !first && v != last {
				notify()
			}
			last = v
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WatchStats reports the state of this handle's watch hub (zero before the
// first Watch).
func (c *Catalog) WatchStats() switchboard.WatchStats {
	c.mu.Lock()
	h := c.hub
	c.mu.Unlock()
	if h == nil {
		return switchboard.WatchStats{Healthy: true}
	}
	return h.Stats()
}
