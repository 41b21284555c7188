package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/config"
)

// backuper is implemented by catalogs that can copy themselves while live
// (the SQLite catalog).
type backuper interface {
	Backup(ctx context.Context, dst string) error
}

func newBackupCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of a live SQLite catalog to FILE",
		Long: `Write a consistent copy of the SQLite catalog to FILE while processes keep using it
(SQLite's VACUUM INTO: one read transaction, writers are not stopped). FILE must not exist.

To restore, put the copy in place under the catalog's name, for example:

  cp backup.db .data/switchboard.db.restore
  rm -f .data/switchboard.db-wal .data/switchboard.db-shm
  mv .data/switchboard.db.restore .data/switchboard.db

Running processes notice within a second that the path names another file, reopen it,
and register their instances again at their next heartbeat; watchers see exactly the
differences. Stopping every process first is the conservative alternative.

For PostgreSQL use pg_dump.

Exit codes: 0 written, 1 failure (no catalog, FILE exists, I/O), 2 invalid input.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usage(errors.New("backup takes one argument, the file to write (run 'switchboard backup --help')"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cat, err := g.readCatalog(cmd.Context())
			if err != nil {
				return err
			}
			defer cat.Close()
			b, ok := cat.(backuper)
			if !ok {
				return usage(fmt.Errorf("backup copies an embedded SQLite catalog; %s is not one (for PostgreSQL use pg_dump)", switchboard.RedactDSN(c.Discovery.DSN)))
			}
			if err := b.Backup(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "backed up %s to %s\n", switchboard.RedactDSN(c.Discovery.DSN), args[0])
			return nil
		},
	}
}

// openExisting is open for the commands of readCatalog, which only read
// the catalog or change rows that must already be in it (ls, leases,
// deregister, reap, backup): it opens an existing catalog as it is, creating
// no file and running no migration the schema does not need; where there is
// none it fails with "no catalog at PATH (nothing has registered there
// yet)", exit 1.
func (g *globals) openExisting(ctx context.Context, c config.Config) (switchboard.Catalog, error) {
	d, err := switchboard.ParseDSN(c.Discovery.DSN)
	if err != nil {
		return nil, usage(g.nameSource(err))
	}
	if d.Memory {
		return nil, usage(g.nameSource(&switchboard.FieldError{Field: "dsn", Value: d.Raw,
			Reason: "an in-memory catalog lives in one process; use sqlite://PATH or postgres://… (only `demo` runs in one process)"}))
	}
	opts := c.Options()
	opts.Logger = g.log
	opts.MustExist = true
	cat, err := switchboard.Open(ctx, c.Discovery.DSN, opts)
	if err != nil {
		if errors.Is(err, switchboard.ErrInvalid) || errors.Is(err, switchboard.ErrUnknownBackend) {
			return nil, usage(g.nameSource(err))
		}
		return nil, err
	}
	return cat, nil
}
