// Package sqlite is the embedded SQLite catalog backend of Switchboard:
// "sqlite://PATH", "sqlite:///abs/path.db" and "sqlite::memory:".
//
// The database runs in WAL mode with synchronous=NORMAL, a busy timeout and
// foreign keys on every pooled connection (set through the driver's DSN
// parameters, so a connection the pool opens later gets them too). Writes go
// through one dedicated connection per process that begins with BEGIN
// IMMEDIATE, so two writers never deadlock on a lock upgrade, and are retried
// with jittered backoff on SQLITE_BUSY / SQLITE_LOCKED. Writers of all
// processes queue on an flock of "<db>-wlock" first, so none starves in
// SQLite's sleeping busy handler. Concurrent Register, Heartbeat and
// Deregister calls of one handle are group-committed: one of them runs all
// that are waiting in one transaction, each in its own savepoint (see
// writeQueue). All times come from SQLite's clock, never from the process.
//
// Watch is served by the shared hub (internal/hub), fed by the change log of
// this package: in-process writes are handed to it at once; each writer
// announces its commit by writing to "<db>-wlock", which other processes
// notice through inotify, with PRAGMA data_version polled as the fallback
// for writers that do not announce. WAL checkpoints are SQLite's own
// automatic ones.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/switchboard-io/switchboard/internal/millis"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/idgen"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

func init() {
	switchboard.RegisterBackend("sqlite", func(ctx context.Context, dsn switchboard.DSN, opts switchboard.Options) (switchboard.Catalog, error) {
		return Open(ctx, dsn, opts)
	})
}

// Tuning of the connection pools and the write retry.
const (
	// busyTimeout is how long SQLite itself waits for a lock (ms).
	busyTimeout = 5000
	// journalSizeLimit is the length a WAL file that a burst grew is cut
	// back to when it starts over (bytes).
	journalSizeLimit = 64 << 20
	// maxReadConns bounds the read pool of a file catalog.
	maxReadConns = 8
	// retryBudget bounds the extra time spent retrying a transaction that
	// failed with SQLITE_BUSY or SQLITE_LOCKED.
	retryBudget = 2 * time.Second
	// retryMaxDelay caps one backoff step.
	retryMaxDelay = 64 * time.Millisecond
)

// Change-log retention: an entry is trimmed once it is not among the last
// keepChanges entries and older than keepChangesAge; trimming is tried at
// most once per trimEvery per process.
const (
	keepChanges    = 10000
	keepChangesAge = 10 * time.Minute
	// keepLeases is how long a lease row stays after it was released or
	// expired (Leases lists it meanwhile); a reap then drops it.
	keepLeases = time.Hour
	trimEvery  = time.Second
)

// Catalog is a switchboard.Catalog and switchboard.Leaser on one SQLite
// database. It is safe for concurrent use, and several processes may open
// the same file at once.
type Catalog struct {
	opts switchboard.Options
	log  *slog.Logger
	// md logs the first row whose metadata another tool wrote in another
	// form (see storedmeta.Log).
	md  storedmeta.Log
	ids idgen.Source // generates the ids of registrations without one (clustered by handle)
	// path is the absolute database file; empty for an in-memory catalog.
	path string

	// fileMu guards d: every operation uses d under the read lock; reopen
	// swaps it under the write lock when the file was deleted or replaced.
	fileMu sync.RWMutex
	d      *dbs
	// fileCheckEvery is the period of the file identity check, which
	// checksFile says this handle runs (a file, not MustExist).
	fileCheckEvery time.Duration
	checksFile     bool
	fc             fileCheck

	// Change-log retention; fields so that tests can shrink them.
	keepChanges    int64
	keepChangesAge time.Duration
	keepLeases     time.Duration
	trimEvery      time.Duration
	lastTrim       atomic.Int64 // unix nanoseconds of the last trim attempt

	closed   atomic.Bool
	wq       writeQueue // group commits of Register, Heartbeat, Deregister
	mu       sync.Mutex // guards hub, detector, fileTicker and closing
	hub      *hub.Hub
	detector *detector
	// fileTicker runs the file identity check once a second for a handle
	// with watchers (see fileCheckEvery); nil until the first Watch.
	fileTicker *detector
	closeOnce  sync.Once
	closeErr   error
}

// dbs is one opening of the database: its pools, their prepared
// statements and the write lock. A file catalog opens it again when its
// path comes to name another file (see reopen).
type dbs struct {
	// rdb serves reads (deferred transactions); wdb serves writes (one
	// connection, BEGIN IMMEDIATE). For an in-memory catalog both are the
	// same single-connection pool.
	rdb, wdb *sql.DB
	// anchor keeps an in-memory database alive for the catalog's lifetime.
	anchor *sql.DB
	// dsn opens one more connection to the same database (the
	// data_version poller).
	dsn   string
	wlock *writeLock // queues writers (see writeLock)
	// rstmts and wstmts keep the prepared statements of rdb and wdb (one
	// cache when they are the same pool).
	rstmts, wstmts *stmtCache
	// id is the identity (device, inode) of the file when it was opened.
	id fileID
}

var (
	_ switchboard.Catalog = (*Catalog)(nil)
	_ switchboard.Leaser  = (*Catalog)(nil)
)

// Open opens (creating it and its parent directories when needed) the
// SQLite catalog of dsn and brings its schema up to date. With
// opts.MustExist it opens only an existing catalog: it creates no file or
// directory, and a path holding none is switchboard.ErrNoCatalog; it
// reads a catalog this process may not write (another user's, a
// read-only mount). A writer's open that the file's or its directory's
// permissions would refuse fails first, naming the path and the user.
//
// A file catalog checks, at most every fileCheckEvery, whether its path
// still names the file it has open: first in each operation, and on a
// ticker once it has watchers. When the file was deleted or replaced, it
// logs a warning and opens the path again (see reopen).
func Open(ctx context.Context, dsn switchboard.DSN, opts switchboard.Options) (*Catalog, error) {
	if dsn.Scheme != "sqlite" {
		return nil, fmt.Errorf("sqlite: open %q: not a sqlite DSN", dsn.Raw)
	}
	opts = opts.WithDefaults()
	// The default TTL is stored as every TTL is, in whole milliseconds
	// rounded up: rounded once here, not at every registration.
	opts.DefaultTTL = millis.Round(opts.DefaultTTL)
	c := &Catalog{
		opts:           opts,
		ids:            idgen.New(),
		log:            opts.Logger.With("component", "catalog", "backend", "sqlite"),
		keepChanges:    keepChanges,
		keepChangesAge: keepChangesAge,
		keepLeases:     keepLeases,
		trimEvery:      trimEvery,
		fileCheckEvery: fileCheckEvery,
	}
	c.md.Logger = c.log
	var (
		d   *dbs
		err error
	)
	if dsn.Memory {
		d, err = openMemory()
	} else {
		if c.path, err = filepath.Abs(dsn.Path); err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", dsn.Path, err)
		}
		d, err = c.openFile(opts.MustExist)
	}
	if err != nil {
		return nil, err
	}
	if err := c.migrate(ctx, d, opts.MustExist); err != nil {
		d.close()
		return nil, err
	}
	c.d = d
	c.checksFile = c.path != "" && !opts.MustExist
	c.fc.last.Store(time.Now().UnixNano())
	return c, nil
}

// pragmas are applied by the driver to every new connection, busy_timeout
// first.
func pragmas(memory bool) url.Values {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout))
	q.Add("_pragma", "foreign_keys(1)")
	// Statement and savepoint journals in memory: a multi-row UPDATE (a
	// batch of heartbeats) journals each page it changes first, and past
	// 64 KiB SQLite spills that journal to a temporary file, a write
	// system call per page (a quarter of a heartbeat's CPU in a profile).
	q.Add("_pragma", "temp_store(MEMORY)")
	if !memory {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// No memory mapping of the file. A mapping saved read system calls
		// in large reads (a capability List of 1,000 rows: 3.4 ms without,
		// 2.1 ms with), but SQLite drops a connection's whole mapping at
		// the start of each transaction after another process committed,
		// so every small read of a watcher (the change log after each
		// commit) and every write paid an munmap and page faults; and a
		// checkpoint's sync walked every process's mapping of each page
		// it wrote back (with 200 processes, a fifth of their CPU).
		q.Add("_pragma", "mmap_size(0)")
		// A WAL that a burst grew past this is cut back to it when it
		// starts over (SQLite's automatic checkpoint, every 1,000 pages,
		// lets the next writer start it over).
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", journalSizeLimit))
	}
	return q
}

// openFile opens the pools and the write lock of c.path. With mustExist it
// creates nothing: the file must be there, and every connection is opened
// with SQLite's mode=rw, so none can create it either.
func (c *Catalog) openFile(mustExist bool) (*dbs, error) {
	abs := c.path
	if mustExist {
		if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s (nothing has registered there yet)", switchboard.ErrNoCatalog, abs)
		}
	} else if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: create directory: %w", abs, err)
	} else if err := notWritable(abs); err != nil {
		return nil, err
	}
	d := &dbs{}
	q := pragmas(false)
	name := abs
	if mustExist {
		name = "file:" + (&url.URL{Path: abs}).EscapedPath()
		q.Set("mode", "rw")
		// journal_mode=WAL writes the file: a catalog is in WAL mode
		// already (it is persistent), and any other file stays untouched.
		q["_pragma"] = slices.DeleteFunc(q["_pragma"], func(p string) bool { return strings.HasPrefix(p, "journal_mode") })
		if readOnlySnapshot(abs) {
			// No writer has the file open (it would have made the -shm
			// file) and this process cannot make one: SQLite reads the
			// file as it is, without the shared memory it cannot create.
			q.Set("mode", "ro")
			q.Set("immutable", "1")
			c.log.Info("sqlite: reading the catalog as it is: no writer has it open and this process may not write beside it (a writer starting later is not seen)", "db", abs)
		}
	}
	d.dsn = name + "?" + q.Encode()
	var err error
	if d.rdb, err = sql.Open("sqlite", d.dsn); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	d.rdb.SetMaxOpenConns(maxReadConns)
	d.rdb.SetMaxIdleConns(maxReadConns)
	q.Set("_txlock", "immediate")
	if d.wdb, err = sql.Open("sqlite", name+"?"+q.Encode()); err != nil {
		d.rdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	d.wdb.SetMaxOpenConns(1)
	d.wdb.SetMaxIdleConns(1)
	d.rstmts, d.wstmts = newStmtCache(d.rdb), newStmtCache(d.wdb)
	// The first connection creates the file (unless mustExist); its
	// identity is taken after that, before anything is read. Switching a
	// new file to WAL takes an exclusive lock without SQLite's busy
	// handler, so processes creating one catalog together retry it.
	if err := c.retry(context.Background(), d.rdb.Ping); err != nil {
		d.rdb.Close()
		d.wdb.Close()
		if mustExist && isCantOpen(err) {
			return nil, fmt.Errorf("%w at %s (nothing has registered there yet)", switchboard.ErrNoCatalog, abs)
		}
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	d.id, _ = statID(abs)
	d.wlock, err = newWriteLock(abs)
	if err != nil && mustExist && cannotWrite(err) {
		// A handle that only reads needs no write lock of its own: a
		// catalog this process may read but not write (another user's).
		d.wlock, err = readOnlyLock(abs), nil
	}
	if err != nil {
		d.rdb.Close()
		d.wdb.Close()
		return nil, err
	}
	return d, nil
}

// isCantOpen reports SQLITE_CANTOPEN (a mode=rw open of a missing file).
func isCantOpen(err error) bool {
	var se *msqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN
}

// openMemory opens a private in-memory database (SQLite's memdb VFS, so it
// has ordinary locking) served by one connection; the anchor connection
// keeps it alive even if the pool replaces that connection.
func openMemory() (*dbs, error) {
	q := pragmas(true)
	q.Set("vfs", "memdb")
	q.Set("_txlock", "immediate")
	dsn := "file:/switchboard-" + uuid.NewString() + "?" + q.Encode()
	anchor, err := sql.Open("sqlite", dsn)
	if err == nil {
		err = anchor.Ping()
	}
	if err != nil {
		if anchor != nil {
			anchor.Close()
		}
		return nil, fmt.Errorf("sqlite: open :memory: %w", err)
	}
	anchor.SetMaxOpenConns(1)
	anchor.SetMaxIdleConns(1)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		anchor.Close()
		return nil, fmt.Errorf("sqlite: open :memory: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	d := &dbs{anchor: anchor, rdb: db, wdb: db}
	d.wlock, _ = newWriteLock("")
	d.wstmts = newStmtCache(db)
	d.rstmts = d.wstmts
	return d, nil
}

// Close stops watches and closes the database; it is idempotent. Methods
// called after Close return switchboard.ErrClosed.
func (c *Catalog) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.wq.close(switchboard.ErrClosed)
		c.mu.Lock()
		h, d, ft := c.hub, c.detector, c.fileTicker
		c.hub, c.detector, c.fileTicker = nil, nil, nil
		c.mu.Unlock()
		if ft != nil {
			ft.stop()
		}
		if h != nil {
			h.Close()
		}
		if d != nil {
			d.stop()
		}
		c.fileMu.Lock()
		c.closeErr = c.d.close()
		c.fileMu.Unlock()
	})
	return c.closeErr
}

// opening is use for an operation (every public method takes the database
// through it, by read, writeChange or a group's lead): it first runs the
// file identity check when it is due (see checkFileDue), so that the
// operation works on the file the path names.
func (c *Catalog) opening(ctx context.Context) (d *dbs, done func()) {
	c.checkFileDue(ctx)
	return c.use()
}

// use returns the current opening of the database, held until done is
// called (a reopen waits for it).
func (c *Catalog) use() (d *dbs, done func()) {
	c.fileMu.RLock()
	return c.d, c.fileMu.RUnlock
}

func (d *dbs) close() error {
	d.rstmts.close()
	if d.wstmts != d.rstmts {
		d.wstmts.close()
	}
	errs := []error{d.rdb.Close()}
	if d.wdb != d.rdb {
		errs = append(errs, d.wdb.Close())
	}
	if d.anchor != nil {
		errs = append(errs, d.anchor.Close())
	}
	errs = append(errs, d.wlock.close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// errClosed is returned by methods called after Close.
func errClosed(op string) error {
	return fmt.Errorf("sqlite: %s: %w", op, switchboard.ErrClosed)
}

// retryable reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any
// extended code of them).
func retryable(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// errNoChange, returned by the function of write, rolls the transaction
// back and makes write return nil without notifying the hub.
var errNoChange = errors.New("no change")

// write runs fn in a write transaction (BEGIN IMMEDIATE on the write
// connection) and commits it, retrying the whole transaction with jittered
// backoff while it fails with SQLITE_BUSY or SQLITE_LOCKED, for at most
// retryBudget. After a commit the hub, if any, is notified.
func (c *Catalog) write(ctx context.Context, fn func(tx *txn) error) error {
	return c.writeChange(ctx, func(tx *txn) (*hub.Batch, error) { return nil, fn(tx) })
}

// writeChange is write for a transaction that logs changes: fn returns
// them (nil when it logged none), and after the commit they are handed to
// the hub directly, so this process's watchers hear of them without a log
// read.
func (c *Catalog) writeChange(ctx context.Context, fn func(tx *txn) (*hub.Batch, error)) error {
	d, done := c.opening(ctx)
	defer done()
	return c.writeOn(ctx, d, fn)
}

// writeOn is writeChange on the opening d.
func (c *Catalog) writeOn(ctx context.Context, d *dbs, fn func(tx *txn) (*hub.Batch, error)) error {
	unlock, err := d.wlock.lock(ctx)
	if err != nil {
		return err
	}
	var change *hub.Batch
	err = c.retry(ctx, func() error {
		sqlTx, err := d.wdb.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		tx := &txn{Tx: sqlTx, sc: d.wstmts}
		if change, err = fn(tx); err == nil && change != nil {
			// The epoch of the file this transaction wrote, read in it: the
			// hub applies the batch only within its cursor's history.
			err = tx.QueryRowContext(ctx, epochSQL).Scan(&change.Epoch)
		}
		if err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	if err == nil {
		d.wlock.announce()
	}
	unlock()
	d.wstmts.prepareWanted(ctx)
	switch {
	case errors.Is(err, errNoChange):
		return nil
	case err == nil && change != nil:
		c.publish(*change)
	case err == nil:
		c.notify()
	}
	return err
}

// read runs fn in a read transaction: every statement of fn sees the same
// snapshot of the database.
func (c *Catalog) read(ctx context.Context, fn func(tx *txn) error) error {
	d, done := c.opening(ctx)
	defer done()
	return c.readOn(ctx, d, fn)
}

// readOn is read on the opening d.
func (c *Catalog) readOn(ctx context.Context, d *dbs, fn func(tx *txn) error) error {
	err := c.retry(ctx, func() error {
		sqlTx, err := d.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer sqlTx.Rollback()
		return fn(&txn{Tx: sqlTx, sc: d.rstmts})
	})
	d.rstmts.prepareWanted(ctx)
	return err
}

// retry calls fn until it succeeds, fails with an error other than BUSY or
// LOCKED, ctx ends, or retryBudget is spent.
func (c *Catalog) retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(retryBudget)
	delay := time.Millisecond
	for {
		err := fn()
		if err == nil || !retryable(err) || time.Now().After(deadline) {
			if err != nil && c.closed.Load() {
				return fmt.Errorf("%w: %w", switchboard.ErrClosed, err)
			}
			return err
		}
		sleep := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, retryMaxDelay)
	}
}

// publish hands committed changes to the hub, if someone watches.
func (c *Catalog) publish(b hub.Batch) {
	c.mu.Lock()
	h := c.hub
	c.mu.Unlock()
	if h != nil {
		h.Publish(b)
	}
}

// watched reports whether this handle has a hub (someone watched).
func (c *Catalog) watched() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hub != nil
}

// notify tells the hub, if someone watches, that the catalog changed.
func (c *Catalog) notify() {
	c.mu.Lock()
	h := c.hub
	c.mu.Unlock()
	if h != nil {
		h.Notify()
	}
}

// DefaultTTL is the TTL an instance registered without one is given
// (switchboard.TTLDefaulter).
func (c *Catalog) DefaultTTL() time.Duration { return c.opts.DefaultTTL }

var _ switchboard.TTLDefaulter = (*Catalog)(nil)
