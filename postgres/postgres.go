// Package postgres is the PostgreSQL catalog: several hosts share one
// registry through one database. Every timestamp and every TTL comparison
// uses the database's now(); changes are pushed to watchers through one
// LISTEN connection per process and a change log the shared hub reads.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/hub"
	"github.com/switchboard-io/switchboard/internal/millis"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
)

func init() {
	switchboard.RegisterBackend("postgres", func(ctx context.Context, dsn switchboard.DSN, opts switchboard.Options) (switchboard.Catalog, error) {
		return Open(ctx, dsn, opts)
	})
}

// Channel is the LISTEN/NOTIFY channel every change-writing transaction
// notifies.
const Channel = "switchboard_changes"

// Change-log retention: an entry is trimmed once it is both outside the last
// keepEntries entries and older than keepAge.
const (
	defaultKeepEntries = 10000
	defaultKeepAge     = 10 * time.Minute
	// defaultKeepLeases is how long a lease row stays after it was
	// released or expired (Leases lists it meanwhile); a reap then drops it.
	defaultKeepLeases = time.Hour
	trimEvery         = 256 // change-writing transactions between opportunistic trims
)

// Catalog is a switchboard.Catalog, Leaser, Drainer and HealthSetter on
// PostgreSQL. It is safe for concurrent use.
type Catalog struct {
	pool *pgxpool.Pool
	// dsn is the DSN as given: its passwords are redacted from every error
	// and log line (pgx's own redaction is best effort).
	dsn  string
	opts switchboard.Options
	log  *slog.Logger
	// md logs the first row whose metadata another tool wrote in another
	// form (see storedmeta.Log).
	md storedmeta.Log

	keepEntries int64
	keepAge     time.Duration
	keepLeases  time.Duration
	writes      atomic.Int64 // change-writing transactions, to pace trimming

	// A log read blocked at a gap is repeated (watch.go, recheck).
	recheckPending atomic.Bool
	recheckDelay   atomic.Int64 // time.Duration of the last recheck

	closed    atomic.Bool
	closeOnce sync.Once
	ctx       context.Context // cancelled by Close: stops the listener
	cancel    context.CancelFunc

	mu       sync.Mutex
	hub      *hub.Hub // created at the first Watch
	listenWG sync.WaitGroup
	// onListen, when set (tests), is called each time the listener has
	// (re)connected and issued LISTEN.
	onListen func()
}

var (
	_ switchboard.Catalog      = (*Catalog)(nil)
	_ switchboard.Leaser       = (*Catalog)(nil)
	_ switchboard.WatchStatser = (*Catalog)(nil)
)

// Open connects to the database of dsn (a postgres:// URL, passed to pgx
// unchanged but for its scheme's case: pool_max_conns and the other pgx
// parameters apply), migrates
// its schema to the current version and returns the catalog. A server it
// cannot reach is switchboard.ErrUnreachable; each connection's setup is
// bounded by the DSN's connect_timeout, else DefaultConnectTimeout. A
// server that answers and refuses says so: a database that does not exist
// is switchboard.ErrNoCatalog, a parameter the server does not know
// switchboard.ErrInvalidDSN. With opts.MustExist, a
// current schema is only read (no migration lock, no DDL) and a database
// without one is switchboard.ErrNoCatalog.
func Open(ctx context.Context, dsn switchboard.DSN, opts switchboard.Options) (*Catalog, error) {
	if dsn.Scheme != "postgres" {
		return nil, fmt.Errorf("postgres: %w: scheme %q is not postgres", switchboard.ErrInvalidDSN, dsn.Scheme)
	}
	opts = opts.WithDefaults()
	// The default TTL is stored as every TTL is, in whole milliseconds
	// rounded up: rounded once here, not at every registration.
	opts.DefaultTTL = millis.Round(opts.DefaultTTL)
	cfg, err := pgxpool.ParseConfig(connString(dsn.Raw))
	if err != nil {
		return nil, switchboard.RedactError(fmt.Errorf("postgres: %w: %v", switchboard.ErrInvalidDSN, err), dsn.Raw)
	}
	timeout := connectTimeout(dsn.Raw, cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, switchboard.RedactError(fmt.Errorf("postgres: connect: %w", err), dsn.Raw)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, switchboard.RedactError(connectError(ctx, err, cfg, timeout), dsn.Raw)
	}
	current := false
	if opts.MustExist {
		if current, err = schemaCurrent(ctx, pool); err != nil {
			pool.Close()
			if errors.Is(err, switchboard.ErrNoCatalog) {
				return nil, fmt.Errorf("postgres: %w in %s (nothing has registered there yet)", err, where(cfg))
			}
			return nil, switchboard.RedactError(err, dsn.Raw)
		}
	}
	if !current {
		if err := migrate(ctx, pool, opts.Logger); err != nil {
			pool.Close()
			return nil, switchboard.RedactError(err, dsn.Raw)
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Catalog{
		pool:        pool,
		dsn:         dsn.Raw,
		opts:        opts,
		log:         opts.Logger.With("catalog", "postgres"),
		keepEntries: defaultKeepEntries,
		keepLeases:  defaultKeepLeases,
		keepAge:     defaultKeepAge,
		ctx:         cctx,
		cancel:      cancel,
	}
	c.md.Logger = c.log
	return c, nil
}

// where names the database of cfg in messages: host, port, database and
// schema (search_path), never the password.
func where(cfg *pgxpool.Config) string {
	w := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if sp := cfg.ConnConfig.RuntimeParams["search_path"]; sp != "" {
		w += " (schema " + sp + ")"
	}
	return w
}

// Now returns the database's clock.
func (c *Catalog) Now(ctx context.Context) (time.Time, error) {
	if err := c.check(); err != nil {
		return time.Time{}, err
	}
	var now time.Time
	if err := c.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("postgres: now: %w", err)
	}
	return now.UTC(), nil
}

// Close stops every watch and the listener and closes the connections. It
// is idempotent.
func (c *Catalog) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.cancel()
		c.mu.Lock()
		h := c.hub
		c.mu.Unlock()
		if h != nil {
			h.Close()
		}
		c.listenWG.Wait()
		c.pool.Close()
	})
	return nil
}

func (c *Catalog) check() error {
	if c.closed.Load() {
		return switchboard.ErrClosed
	}
	return nil
}

// notify tells this process's hub (if anyone watches) that the catalog
// changed; other processes learn it through NOTIFY.
func (c *Catalog) notify() {
	c.mu.Lock()
	h := c.hub
	c.mu.Unlock()
	if h != nil {
		h.Notify()
	}
}

// publish hands this process's hub a write it has just committed, so its
// watchers hear of it without reading the log (the hub falls back to a read
// when the write does not directly follow what it has seen).
func (c *Catalog) publish(changes []hub.Change, now time.Time, epoch string) {
	c.mu.Lock()
	h := c.hub
	c.mu.Unlock()
	if h == nil || len(changes) == 0 {
		return
	}
	h.Publish(hub.Batch{Changes: changes, Seq: changes[len(changes)-1].Seq, Epoch: epoch, Now: now.UTC()})
}

// WatchStats reports this handle's watch machinery (zero, and healthy,
// before the first Watch).
func (c *Catalog) WatchStats() switchboard.WatchStats {
	c.mu.Lock()
	h := c.hub
	c.mu.Unlock()
	if h == nil {
		return switchboard.WatchStats{Healthy: true}
	}
	return h.Stats()
}

// wrap adds the operation to err, keeping sentinels reachable, turning
// errors caused by Close into ErrClosed and a table that does not exist
// into a tablesMissingError.
func (c *Catalog) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if c.closed.Load() && !errors.Is(err, switchboard.ErrClosed) {
		return switchboard.RedactError(fmt.Errorf("postgres: %s: %w (%v)", op, switchboard.ErrClosed, err), c.dsn)
	}
	return switchboard.RedactError(fmt.Errorf("postgres: %s: %w", op, c.tablesMissing(err)), c.dsn)
}

// tablesMissingError says that the catalog's tables are gone from under an
// open handle: the database was restarted empty, restored without them, or
// the schema dropped. Only writers create them again (Register and
// Heartbeat of a handle not opened with MustExist: a Bootstrap's heartbeat
// then finds its rows missing and registers them again); until then every
// other call fails with this error. It wraps switchboard.ErrNoCatalog and
// the server's error.
type tablesMissingError struct {
	where     string // the database and schema (never the password)
	mustExist bool   // the handle creates nothing
	err       error  // the server's (undefined_table)
}

func (e *tablesMissingError) Error() string {
	again := "the next registration or heartbeat creates them again"
	if e.mustExist {
		again = "the next registration or heartbeat of a process that may create the catalog (not opened with MustExist) creates them again"
	}
	return fmt.Sprintf("catalog tables missing in %s (database restarted empty, restored without them, or schema dropped); %s (%v)",
		e.where, again, e.err)
}

// Unwrap returns switchboard.ErrNoCatalog and the server's error.
func (e *tablesMissingError) Unwrap() []error { return []error{switchboard.ErrNoCatalog, e.err} }

// tablesMissing returns err as a tablesMissingError when the server said
// that a table does not exist, and err itself otherwise (or when it is one
// already).
func (c *Catalog) tablesMissing(err error) error {
	var tm *tablesMissingError
	var pe *pgconn.PgError
	if errors.As(err, &tm) || !errors.As(err, &pe) || pe.Code != undefinedTable {
		return err
	}
	return &tablesMissingError{where: where(c.pool.Config()), mustExist: c.opts.MustExist, err: err}
}

// undefinedTable is the SQLSTATE of a table that does not exist.
const undefinedTable = "42P01"

// connString is a DSN as pgx reads it. The scheme is case-insensitive
// (switchboard.ParseDSN accepts "Postgres://…"), but pgx tells a URL from
// a keyword/value string by a lower-case "postgres://" or "postgresql://"
// prefix and would read "POSTGRES://…" as keywords. Only such a scheme is
// lowered: a keyword/value string is passed on as it is, a "://" in its
// password included.
func connString(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql")) {
		return strings.ToLower(scheme) + "://" + rest
	}
	return raw
}

// DefaultTTL is the TTL an instance registered without one is given
// (switchboard.TTLDefaulter).
func (c *Catalog) DefaultTTL() time.Duration { return c.opts.DefaultTTL }

var _ switchboard.TTLDefaulter = (*Catalog)(nil)
