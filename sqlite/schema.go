package sqlite

import (
	"context"
	"fmt"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/backend"
	"github.com/switchboard-io/switchboard/internal/hub"
)

// nowSQL is SQLite's clock in microseconds since the Unix epoch. 'now' has
// millisecond resolution, so it is rounded to the millisecond first (the
// julianday double is only exact to ~40 µs).
const nowSQL = `(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000)`

// migrations is the ordered schema history: migrations[i] brings the schema
// from version i to version i+1. Append only; never edit an applied entry.
var migrations = []string{
	// 1: instances, their capabilities, the change log, leases.
	`CREATE TABLE instances (
		id            TEXT PRIMARY KEY,
		name          TEXT NOT NULL,
		type          TEXT NOT NULL,
		address       TEXT NOT NULL,
		capabilities  TEXT NOT NULL DEFAULT '[]',
		version       TEXT NOT NULL DEFAULT '',
		metadata      TEXT NOT NULL DEFAULT '{}',
		components    TEXT,
		ttl_ms        INTEGER NOT NULL,
		registered_at INTEGER NOT NULL,
		last_seen     INTEGER NOT NULL
	);
	CREATE INDEX instances_name ON instances(name, id);
	CREATE INDEX instances_last_seen ON instances(last_seen);
	CREATE TABLE instance_capabilities (
		instance_id TEXT NOT NULL REFERENCES instances(id) ON DELETE CASCADE,
		capability  TEXT NOT NULL,
		PRIMARY KEY (instance_id, capability)
	) WITHOUT ROWID;
	CREATE INDEX instance_capabilities_capability ON instance_capabilities(capability, instance_id);
	CREATE TABLE changes (
		seq    INTEGER PRIMARY KEY AUTOINCREMENT,
		id     TEXT NOT NULL,
		op     TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
		reason TEXT NOT NULL DEFAULT '',
		at     INTEGER NOT NULL
	);
	CREATE TABLE leases (
		name       TEXT PRIMARY KEY,
		holder     TEXT NOT NULL,
		token      INTEGER NOT NULL,
		ttl_ms     INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	);
	CREATE TABLE meta (
		key   TEXT PRIMARY KEY,
		value INTEGER NOT NULL
	);
	INSERT INTO meta (key, value) VALUES ('trimmed_seq', 0);`,
	// 2: a stale row coming back to life (a heartbeat or an identical
	// re-registration after its TTL) is a change watchers must hear of: it
	// is added back to every active view. A plain renewal is not logged.
	// Done by a trigger so that a batched heartbeat stays one statement.
	`CREATE TRIGGER instances_revived AFTER UPDATE OF last_seen ON instances
	WHEN NEW.last_seen - OLD.last_seen > OLD.ttl_ms * 1000
	BEGIN
		INSERT INTO changes (id, op, reason, at) VALUES (NEW.id, 'upsert', '', NEW.last_seen);
	END;`,
	// 3: also log a renewal of a row within the last fifth of its TTL, as
	// the PostgreSQL backend does: a watcher that read the row a moment
	// before a heartbeat committed (with an earlier timestamp) may already
	// have expired it, and must hear of its return.
	`DROP TRIGGER instances_revived;
	CREATE TRIGGER instances_revived AFTER UPDATE OF last_seen ON instances
	WHEN NEW.last_seen - OLD.last_seen > OLD.ttl_ms * 800
	BEGIN
		INSERT INTO changes (id, op, reason, at) VALUES (NEW.id, 'upsert', '', NEW.last_seen);
	END;`,
	// 4: the catalog's epoch, a random number created with the schema: the
	// change log's positions are only meaningful within one epoch, so a
	// watcher whose cursor came from a deleted, re-created or replaced file
	// resyncs from a snapshot instead of reading another history's entries.
	`INSERT INTO meta (key, value) VALUES ('epoch', random());`,
	// 5: instances becomes a WITHOUT ROWID table keyed by id, so that a
	// lookup by id (each row a capability List returns) is one B-tree
	// search instead of two (the id index, then the table), and gains the
	// packed form of each row (see packed.go), which a List or a snapshot
	// reads instead of nine columns. The rows move over with their packed
	// form; the capability rows are set aside while the old table goes
	// (dropping it deletes them through the foreign key) and put back. The
	// triggers pack a row that a write left unpacked or out of date: one by
	// a program built before this migration, or any other tool (this
	// package's statements set packed themselves, so their WHEN is false).
	`CREATE TABLE instances_v5 (
		id            TEXT PRIMARY KEY,
		name          TEXT NOT NULL,
		type          TEXT NOT NULL,
		address       TEXT NOT NULL,
		capabilities  TEXT NOT NULL DEFAULT '[]',
		version       TEXT NOT NULL DEFAULT '',
		metadata      TEXT NOT NULL DEFAULT '{}',
		components    TEXT,
		ttl_ms        INTEGER NOT NULL,
		registered_at INTEGER NOT NULL,
		last_seen     INTEGER NOT NULL,
		packed        TEXT
	) WITHOUT ROWID;
	INSERT INTO instances_v5 (id, name, type, address, capabilities, version, metadata, components, ttl_ms, registered_at, last_seen, packed)
		SELECT id, name, type, address, capabilities, version, metadata, components, ttl_ms, registered_at, last_seen, ` + packSQL("instances") + `
		FROM instances;
	CREATE TEMP TABLE instance_capabilities_v5 AS SELECT instance_id, capability FROM instance_capabilities;
	DROP TABLE instances;
	ALTER TABLE instances_v5 RENAME TO instances;
	INSERT INTO instance_capabilities (instance_id, capability) SELECT instance_id, capability FROM temp.instance_capabilities_v5;
	DROP TABLE temp.instance_capabilities_v5;
	CREATE INDEX instances_name ON instances(name, id);
	CREATE INDEX instances_last_seen ON instances(last_seen);
	CREATE TRIGGER instances_revived AFTER UPDATE OF last_seen ON instances
	WHEN NEW.last_seen - OLD.last_seen > OLD.ttl_ms * 800
	BEGIN
		INSERT INTO changes (id, op, reason, at) VALUES (NEW.id, 'upsert', '', NEW.last_seen);
	END;
	CREATE TRIGGER instances_pack_insert AFTER INSERT ON instances
	WHEN NEW.packed IS NULL
	BEGIN
		UPDATE instances SET packed = ` + packSQL("NEW") + ` WHERE id = NEW.id;
	END;
	CREATE TRIGGER instances_pack_update
	AFTER UPDATE OF id, name, type, address, capabilities, version, metadata, ttl_ms, registered_at, packed ON instances
	WHEN NEW.packed IS NOT ` + packSQL("NEW") + `
	BEGIN
		UPDATE instances SET packed = ` + packSQL("NEW") + ` WHERE id = NEW.id;
	END;`,
	// 6: the last_seen index becomes (ttl_ms, last_seen): whether a row is
	// due for reaping depends on its own TTL (last_seen older than twice
	// it), which no range of an index on last_seen alone expresses, so
	// every reaper's look read the whole table. With the TTL first, each
	// distinct TTL is one range of the index (see byTTL). A heartbeat
	// updates one index entry, as before.
	`DROP INDEX instances_last_seen;
	CREATE INDEX instances_expiry ON instances(ttl_ms, last_seen);`,
	// 7: every row carries its revision, the seq of the change-log entry
	// that last wrote it (a registration, an update, a revival), set in the
	// same transaction as the entry by a trigger, so that every writer,
	// this release's, an older one's or another tool's, keeps it. Watchers
	// compare revisions to take only newer states (internal/hub). Rows
	// whose entries were trimmed start at 0: "unknown", as before.
	`ALTER TABLE instances ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
	UPDATE instances SET revision = coalesce(
		(SELECT max(seq) FROM changes c WHERE c.id = instances.id AND c.op = 'upsert'), 0);
	CREATE TRIGGER changes_revision AFTER INSERT ON changes WHEN NEW.op = 'upsert'
	BEGIN
		UPDATE instances SET revision = NEW.seq WHERE id = NEW.id;
	END;`,
	// 8: lease rows released or expired long ago are deleted (lease.go);
	// the highest token they held is kept here, and a lease taken anew
	// starts above it, so fencing tokens never go back.
	`INSERT INTO meta (key, value) VALUES ('lease_token_floor', 0);`,
	// 9: the traffic state (see traffic.go), additive: an older release
	// sharing the file neither reads nor writes these columns, and its
	// rows get the defaults. check_spec is the check's JSON (NULL: none);
	// health_since is µs on the catalog clock (NULL: never judged).
	`ALTER TABLE instances ADD COLUMN weight INTEGER NOT NULL DEFAULT 100;
	ALTER TABLE instances ADD COLUMN zone TEXT NOT NULL DEFAULT '';
	ALTER TABLE instances ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE instances ADD COLUMN check_spec TEXT;
	ALTER TABLE instances ADD COLUMN health_status TEXT NOT NULL DEFAULT '';
	ALTER TABLE instances ADD COLUMN health_output TEXT NOT NULL DEFAULT '';
	ALTER TABLE instances ADD COLUMN health_since INTEGER;`,
	// 10: the catalog's compat version (see exclusiveMigrations): the
	// oldest schema version whose programs may still read and write it.
	// Migrations 7 to 10 are additive, so a program of version 6 still can.
	`INSERT INTO meta (key, value) VALUES ('compat_version', 6);`,
	// 11: the schema version of the program that last registered each row
	// (0: one from before this column), additive: an exclusive migration
	// waits until no live row was registered by a program that cannot run
	// beside it (olderWriters).
	`ALTER TABLE instances ADD COLUMN schema_version INTEGER NOT NULL DEFAULT 0;`,
}

// compatSince is the migration that records the compat version; later
// programs read it to decide whether they may use a catalog newer than
// they know (backend.CheckSchema).
const compatSince = 10

// exclusiveMigrations are the migrations an older program cannot run
// beside: each raises the catalog's compat version to its own number, so
// that programs that know only earlier versions refuse the catalog. Every
// other migration is additive: new columns with defaults, new meta keys,
// triggers every writer runs. 1 creates the schema; 6 drops the index
// instances_last_seen, which programs of version 5 name. A new migration
// that renames or drops what an older program reads or writes, or changes
// what its rows mean, is listed here.
var exclusiveMigrations = map[int]bool{1: true, 6: true}

// migrateHook, when set (by tests), runs inside each migration's
// transaction after its statements and before its version is recorded.
var migrateHook func(version int)

// olderWriters is an *backend.OlderWriters when live rows were registered
// by programs that know only schema versions below migration v (exclusive),
// which may not run until they are gone; nil otherwise. A catalog from
// before schema_version (11) has none to tell, and no exclusive migration
// to wait for.
func olderWriters(ctx context.Context, tx *txn, v int) error {
	const older = ` FROM instances WHERE schema_version < ? AND last_seen + ttl_ms * 1000 > ` + nowSQL
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*)`+older, v).Scan(&n); err != nil || n == 0 {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id`+older+` ORDER BY id LIMIT 3`, v)
	if err != nil {
		return err
	}
	defer rows.Close()
	ow := &backend.OlderWriters{Migration: v, Count: n}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ow.IDs = append(ow.IDs, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return ow
}

// readCompat reads the catalog's compat version (0: not recorded).
func readCompat(ctx context.Context, tx *txn) (int, error) {
	var compat int
	err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT value FROM meta WHERE key = 'compat_version'), 0)`).Scan(&compat)
	return compat, err
}

// byTTL is a query of cols of the rows (alias i) that cond selects, where
// cond may use ttls.t, the row's TTL in milliseconds. It walks the distinct
// TTLs through the instances_expiry index (one seek each) and reads one
// range of the index per TTL when cond bounds i.last_seen: O(d log n + k)
// for d distinct TTLs and k rows, instead of a scan of the table. cond
// comes first among the query's parameters.
func byTTL(cols, cond string) string {
	return `WITH RECURSIVE ttls(t) AS (
			SELECT min(ttl_ms) FROM instances
			UNION ALL
			SELECT (SELECT min(ttl_ms) FROM instances WHERE ttl_ms > ttls.t) FROM ttls WHERE ttls.t IS NOT NULL)
		SELECT ` + cols + ` FROM ttls CROSS JOIN instances i INDEXED BY instances_expiry
		WHERE i.ttl_ms = ttls.t AND ` + cond
}

// epochSQL reads the catalog's epoch (see migration 4).
const epochSQL = `SELECT CAST(value AS TEXT) FROM meta WHERE key = 'epoch'`

// migrate applies the missing migrations on d, each in its own write
// transaction: a migration interrupted (an error, the process killed) is
// rolled back whole by SQLite, and the next open applies it again. A
// catalog at a version newer than this program knows is used as it is
// when its compat version allows this program, and otherwise refused
// before anything is written (backend.CheckSchema). An exclusive migration
// waits (backend.AwaitExclusive) until no live row was registered by a
// program that cannot run beside it. The version is read again inside the transaction (BEGIN
// IMMEDIATE holds the write lock), so processes opening the same new file at
// once apply every migration exactly once and none of them fails. With
// mustExist, a database without the schema is switchboard.ErrNoCatalog
// (nothing is created in it); an older schema is still brought up to date,
// since this program's statements need it.
func (c *Catalog) migrate(ctx context.Context, d *dbs, mustExist bool) error {
	// The common case, a schema already current, is one read: opening the
	// catalog (every `ls`) takes no write lock and wakes no watcher.
	var current, tables, compat int
	err := c.readOn(ctx, d, func(tx *txn) error {
		if err := tx.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil || tables == 0 {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return err
		}
		if current > len(migrations) {
			var err error
			compat, err = readCompat(ctx, tx)
			return err
		}
		return nil
	})
	if err == nil && current > len(migrations) {
		if err := backend.CheckSchema(current, len(migrations), compat); err != nil {
			return fmt.Errorf("sqlite: open %s: %w", c.where(), err)
		}
		c.log.Info("sqlite: catalog schema is newer than this program's and compatible with it; using it as it is",
			"version", current, "known", len(migrations), "compat", compat, "db", c.where())
		return nil
	}
	if err == nil && current == len(migrations) {
		return nil
	}
	if err == nil && mustExist && tables == 0 {
		return fmt.Errorf("%w at %s (the file holds no Switchboard catalog; nothing has registered there yet)", switchboard.ErrNoCatalog, c.where())
	}
	for {
		var applied, from int
		err := backend.AwaitExclusive(ctx, c.log, func() error {
			return c.writeOn(ctx, d, func(tx *txn) (*hub.Batch, error) {
				var n int
				if err := tx.QueryRowContext(ctx,
					`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
					return nil, err
				}
				if n == 0 {
					if _, err := tx.ExecContext(ctx,
						`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
						return nil, err
					}
				}
				if err := tx.QueryRowContext(ctx,
					`SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&from); err != nil {
					return nil, err
				}
				if from > len(migrations) {
					compat, err := readCompat(ctx, tx)
					if err != nil {
						return nil, err
					}
					return nil, backend.CheckSchema(from, len(migrations), compat)
				}
				if from == len(migrations) {
					return nil, nil
				}
				if v := from + 1; v > compatSince && exclusiveMigrations[v] {
					if err := olderWriters(ctx, tx, v); err != nil {
						return nil, err
					}
				}
				if _, err := tx.ExecContext(ctx, migrations[from]); err != nil {
					return nil, fmt.Errorf("migration %d: %w", from+1, err)
				}
				if v := from + 1; v > compatSince && exclusiveMigrations[v] {
					if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'compat_version'`, v); err != nil {
						return nil, err
					}
				}
				if migrateHook != nil {
					migrateHook(from + 1)
				}
				if _, err := tx.ExecContext(ctx,
					`INSERT INTO schema_migrations (version, applied_at) VALUES (?, `+nowSQL+`)`, from+1); err != nil {
					return nil, err
				}
				applied = from + 1
				return nil, nil
			})
		})
		if err != nil {
			return fmt.Errorf("sqlite: migrate %s: %w", c.where(), err)
		}
		if applied == 0 {
			return nil
		}
		c.log.Info("sqlite: schema migrated", "version", applied, "db", c.where())
	}
}
