package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
)

// lockMigrate is the advisory lock class of schema migrations (the first
// key of the two-key form; the second is hashtext(current_schema()), so
// catalogs in different schemas of one database do not serialize each
// other): "SBMG".
const lockMigrate = 0x53424d47

// migrations are applied in order, each once, in its own transaction. Never
// edit a released entry: append a new one.
var migrations = []string{
	1: `
CREATE TABLE instances (
	id            text PRIMARY KEY,
	name          text NOT NULL,
	type          text NOT NULL,
	address       text NOT NULL,
	capabilities  text[] NOT NULL DEFAULT '{}',
	version       text NOT NULL DEFAULT '',
	metadata      jsonb NOT NULL DEFAULT '{}',
	-- json, not jsonb: the component catalog comes back byte for byte, key
	-- order included (port schemas are shown in their given order).
	components    json,
	ttl           interval NOT NULL CHECK (ttl > interval '0'),
	registered_at timestamptz NOT NULL DEFAULT now(),
	last_seen     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX instances_name_idx ON instances (name);
CREATE INDEX instances_last_seen_idx ON instances (last_seen);
CREATE INDEX instances_capabilities_idx ON instances USING gin (capabilities);

CREATE TABLE changes (
	seq    bigserial PRIMARY KEY,
	id     text NOT NULL,
	op     text NOT NULL CHECK (op IN ('upsert', 'delete')),
	reason text NOT NULL DEFAULT '',
	at     timestamptz NOT NULL DEFAULT now()
);

-- One row: the log was trimmed up to and including trimmed_to.
CREATE TABLE change_log (
	one        boolean PRIMARY KEY DEFAULT true CHECK (one),
	trimmed_to bigint NOT NULL DEFAULT 0
);
INSERT INTO change_log DEFAULT VALUES;

CREATE TABLE leases (
	name       text PRIMARY KEY,
	holder     text NOT NULL,
	token      bigint NOT NULL,
	ttl_ms     bigint NOT NULL CHECK (ttl_ms > 0),
	expires_at timestamptz NOT NULL
);
`,
	2: `
-- A heartbeat must be a HOT update that touches no index: with last_seen
-- indexed, every heartbeat inserted a new entry into every index, the GIN
-- one included, whose pending list then slowed every capability lookup.
-- RenewedSince and Reap scan instead (cheap next to 10,000 index inserts a
-- second), and pages keep room for the new row versions.
DROP INDEX instances_last_seen_idx;
ALTER TABLE instances SET (fillfactor = 70);
-- Capabilities change only on registration: lookups read the index tree
-- directly instead of a pending list.
ALTER INDEX instances_capabilities_idx SET (fastupdate = off);
-- Set by each heartbeat from the row it replaces: whether the instance had
-- gone (nearly) stale, so its return is logged for watchers.
ALTER TABLE instances ADD COLUMN revived boolean NOT NULL DEFAULT false;
`,
	3: `
-- The catalog's epoch, created with the schema: change-log positions are
-- only meaningful within one epoch, so a watcher whose cursor came from a
-- dropped and re-created schema resyncs from a snapshot instead of reading
-- another history's entries (see epochSQL for restores).
ALTER TABLE change_log ADD COLUMN epoch text NOT NULL DEFAULT md5(random()::text || clock_timestamp()::text);
`,
	4: `
-- Writers no longer serialise on a change-log lock; readers follow the
-- watermark of watermark.go, which needs seqs handed out in the order they
-- are drawn across sessions: no per-session cache (the default, made
-- explicit). Programs from before this version assume the lock, so they
-- refuse a catalog at this version instead of reading it wrongly.
ALTER SEQUENCE changes_seq_seq CACHE 1;
`,
	5: `
-- Every row carries its revision: the seq of the change-log entry that last
-- wrote it. Watchers take a state only when its revision is newer than the
-- one they hold, so no path (snapshot, log read, notification) can take
-- them back to an older state.
ALTER TABLE instances ADD COLUMN revision bigint NOT NULL DEFAULT 0;
UPDATE instances i SET revision = coalesce(
	(SELECT max(c.seq) FROM changes c WHERE c.id = i.id AND c.op = 'upsert'), 0);
-- Every entry's seq is drawn here, whoever inserts it (this release, an
-- older one, a repair script): the transaction id first, so that from the
-- moment a seq exists its writer is in pg_locks under an id a reader can
-- follow (watermark.go); then the seq, overriding any value the insert
-- carried (one a writer drew itself, maybe before it had an id, is left
-- unused: a gap readers settle like a rollback's); then the
-- row's revision, in the same transaction as the entry. The column loses
-- its default, which drew a number before the trigger ran: every entry
-- would leave a gap. The function's search_path is the catalog's schema,
-- whatever the inserting session's is (OR REPLACE: dropped tables leave
-- the function behind, and a re-created catalog runs this again).
ALTER TABLE changes ALTER COLUMN seq DROP DEFAULT;
CREATE OR REPLACE FUNCTION changes_assign() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $fn$
BEGIN
	PERFORM pg_current_xact_id();
	NEW.seq := nextval('changes_seq_seq');
	IF NEW.op = 'upsert' THEN
		UPDATE instances SET revision = NEW.seq WHERE id = NEW.id;
	END IF;
	RETURN NEW;
END
$fn$;
CREATE TRIGGER changes_assign BEFORE INSERT ON changes FOR EACH ROW EXECUTE FUNCTION changes_assign();
`,
	6: `
-- Lease rows released or expired long ago are dropped by reaps (leases.go);
-- the highest token they held is kept here, and a lease taken anew starts
-- above it, so fencing tokens never go back.
ALTER TABLE change_log ADD COLUMN lease_token_floor bigint NOT NULL DEFAULT 0;
`,
	7: `
-- The traffic state (traffic.go). Additive, with defaults: a program of an
-- older version writing the same tables leaves these columns alone, and a
-- row it inserts gets the default weight, no zone, no check. check_spec is
-- the check's JSON form (switchboard.Check's MarshalJSON); health_status
-- is '' while no check has judged the row (passing), and health_since
-- is when health_status last changed, by the database clock.
ALTER TABLE instances
	ADD COLUMN weight integer NOT NULL DEFAULT 100,
	ADD COLUMN zone text NOT NULL DEFAULT '',
	ADD COLUMN draining boolean NOT NULL DEFAULT false,
	ADD COLUMN check_spec jsonb NULL,
	ADD COLUMN health_status text NOT NULL DEFAULT '',
	ADD COLUMN health_output text NOT NULL DEFAULT '',
	ADD COLUMN health_since timestamptz NULL;
`,
	8: `
-- The catalog's compat version (see exclusiveMigrations): the oldest schema
-- version whose programs may still read and write it. Migrations 5 to 8 are
-- additive, so a program of version 4 still can.
ALTER TABLE change_log ADD COLUMN compat_version integer NOT NULL DEFAULT 4;
`,
	9: `
-- The schema version of the program that last registered each row (0: one
-- from before this column), additive: an exclusive migration waits until no
-- live row was registered by a program that cannot run beside it.
ALTER TABLE instances ADD COLUMN schema_version integer NOT NULL DEFAULT 0;
`,
}

// compatSince is the migration that records the compat version; later
// programs read it to decide whether they may use a catalog newer than
// they know (backend.CheckSchema).
const compatSince = 8

// exclusiveMigrations are the migrations an older program cannot run
// beside: each raises the catalog's compat version to its own number, so
// that programs that know only earlier versions refuse the catalog. Every
// other migration is additive: new columns with defaults, triggers every
// writer runs. 1 creates the schema; 4 changes how readers follow the
// change log (programs of version 3 assume a lock writers no longer take).
// A new migration that renames or drops what an older program reads or
// writes, or changes what its rows mean, is listed here.
var exclusiveMigrations = map[int]bool{1: true, 4: true}

// compatSQL reads the catalog's compat version, 0 when it records none
// (a catalog from before compatSince; the column is then absent).
const compatSQL = `SELECT coalesce((SELECT (to_jsonb(c) ->> 'compat_version')::int FROM change_log c), 0)`

// migrateHook, when set (by tests), runs inside each migration's
// transaction after its statements and before its version is recorded.
var migrateHook func(version int)

// checkNewer reads the compat version of a catalog at version current,
// newer than this program knows, and refuses it unless this program may
// use it (backend.CheckSchema).
func checkNewer(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, current int) error {
	var compat int
	if err := q.QueryRow(ctx, compatSQL).Scan(&compat); err != nil {
		return fmt.Errorf("postgres: read the catalog's compat version: %w", err)
	}
	if err := backend.CheckSchema(current, len(migrations)-1, compat); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// epochSQL is the catalog's epoch as the hub compares it: the epoch stored
// with the schema; the identity of the change-log table, which a restore
// (pg_restore --clean, or a dump into a new database) re-creates with a new
// OID even when it brings the stored epoch back; and the cluster's system
// identifier and timeline, which a restore into another cluster, a
// point-in-time recovery or a failover to a replica change (the replica's
// log may lack entries a watcher read from the old primary).
const epochSQL = `(SELECT epoch || '/' || 'changes'::regclass::oid::text
	|| '/' || (SELECT system_identifier FROM pg_control_system())::text
	|| '/' || (SELECT timeline_id FROM pg_control_checkpoint())::text FROM change_log)`

// schemaCurrent reads, without writing or locking anything, whether the
// current schema holds a catalog at this program's version, or a newer one
// this program may use (a newer one it may not use is an error).
// switchboard.ErrNoCatalog when it holds none.
func schemaCurrent(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var exists bool
	var version int
	err := pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists)
	if err == nil && !exists {
		return false, switchboard.ErrNoCatalog
	}
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: read schema version: %w", err)
	}
	if version == 0 {
		return false, switchboard.ErrNoCatalog
	}
	if version > len(migrations)-1 {
		if err := checkNewer(ctx, pool, version); err != nil {
			return false, err
		}
		return true, nil
	}
	return version == len(migrations)-1, nil
}

// migrate brings the schema of the connection's current schema to the
// latest version under a session advisory lock, so concurrent processes
// starting at once apply each migration exactly once. Each migration runs
// in its own transaction with its version's row: one interrupted (an
// error, the process or its connection gone) is rolled back whole by the
// server, and the next start applies it again. A catalog newer than this
// program knows is used as it is when its compat version allows this
// program, and otherwise refused before anything is written. An exclusive
// migration waits (backend.AwaitExclusive, under the lock) until no live
// row was registered by a program that cannot run beside it.
func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, lockMigrate); err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", err)
	}
	defer func() {
		// A failed unlock (connection lost) releases the lock anyway.
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, lockMigrate)
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if current > len(migrations)-1 {
		return checkNewer(ctx, conn, current)
	}
	for v := current + 1; v < len(migrations); v++ {
		err := backend.AwaitExclusive(ctx, log, func() error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if v > compatSince && exclusiveMigrations[v] {
					if err := olderWriters(ctx, tx, v); err != nil {
						return err
					}
				}
				if _, err := tx.Exec(ctx, migrations[v]); err != nil {
					return err
				}
				if v > compatSince && exclusiveMigrations[v] {
					if _, err := tx.Exec(ctx, `UPDATE change_log SET compat_version = $1`, v); err != nil {
						return err
					}
				}
				if migrateHook != nil {
					migrateHook(v)
				}
				_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v)
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("postgres: migrate to version %d: %w", v, err)
		}
	}
	return nil
}

// olderWriters is an *backend.OlderWriters when live rows were registered
// by programs that know only schema versions below migration v (exclusive),
// which may not run until they are gone; nil otherwise.
func olderWriters(ctx context.Context, tx pgx.Tx, v int) error {
	ow := &backend.OlderWriters{Migration: v}
	err := tx.QueryRow(ctx, `SELECT count(*), coalesce((array_agg(id ORDER BY id))[1:3], '{}')
		FROM instances WHERE schema_version < $1 AND now() - last_seen <= ttl`, v).Scan(&ow.Count, &ow.IDs)
	if err != nil || ow.Count == 0 {
		return err
	}
	return ow
}

// recreate creates the catalog's schema again when err says one of its
// tables does not exist: the database was restarted empty, restored without
// it, or the schema dropped. Heartbeat and Register call it, so that every
// registration comes back (heartbeats report the rows missing, bootstraps
// register them again) instead of failing until the process restarts. It
// reports whether it migrated; a handle opened with MustExist creates
// nothing.
func (c *Catalog) recreate(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != undefinedTable || c.opts.MustExist {
		return false
	}
	if merr := migrate(ctx, c.pool, c.log); merr != nil {
		c.log.Warn("catalog tables are gone; creating them again failed", "err", switchboard.RedactError(merr, c.dsn))
		return false
	}
	c.log.Warn("catalog tables were gone (database restarted empty or restored without them); created them again")
	return true
}
