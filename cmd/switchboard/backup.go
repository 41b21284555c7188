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
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of a live SQLite catalog to FILE",
		Long: `Write a consistent copy of the SQLite catalog to FILE while processes keep using it
(SQLite's VACUUM INTO: one read transaction; writers are not stopped). FILE must not exist.
The copy is a history of its own: restored, watchers resync from it exactly.

To restore, put the copy in place under the catalog's name:

  cp backup.db .data/switchboard.db.restore
  rm -f .data/switchboard.db-wal .data/switchboard.db-shm
  mv .data/switchboard.db.restore .data/switchboard.db

Running processes notice within a second that the path names another file, open it again,
and register their instances again at their next heartbeat; watchers see exactly the
differences. Stopping every process first is the conservative alternative.

For PostgreSQL use pg_dump.`,
		Example: `  switchboard backup /var/backups/switchboard-$(date +%F).db
  switchboard --dsn sqlite:///srv/catalog.db backup copy.db`,
		Args: oneArg("FILE (the copy to write)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cat, err := g.existingCatalog(cmd.Context())
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
	cmd.Annotations = map[string]string{annEnv: envDSNHelp}
	return cmd
}

// existingCatalog is readCatalog for the commands that only read the
// catalog or change rows that must already be in it (ls, leases,
// deregister, reap, backup; not watch, which may start before anything
// registered): it opens an existing catalog as it is, creating
// no file and running no migration the schema does not need; where there is
// none it fails with "no catalog at PATH (nothing has registered there
// yet)", exit 1.
func (g *globals) existingCatalog(ctx context.Context) (config.Config, switchboard.Catalog, error) {
	c, err := g.readConfig()
	if err != nil {
		return config.Config{}, nil, err
	}
	d, err := switchboard.ParseDSN(c.Discovery.DSN)
	if err != nil {
		return config.Config{}, nil, usage(g.nameSource(c, err))
	}
	if d.Memory {
		return config.Config{}, nil, usage(g.nameSource(c, &switchboard.FieldError{Field: "dsn", Value: d.Raw,
			Reason: "an in-memory catalog lives in one process; use sqlite://PATH or postgres://… (only `demo` runs in one process)"}))
	}
	opts := c.Options()
	opts.Logger = g.log
	opts.MustExist = true
	secret := ""
	if g.cmd != nil && g.cmd.Flag("secret") != nil {
		if secret, err = g.instanceSecret(g.cmd, c); err != nil {
			return config.Config{}, nil, err
		}
	}
	cat, err := openDSNWith(ctx, c, opts, secret)
	if err != nil {
		if errors.Is(err, switchboard.ErrInvalid) || errors.Is(err, switchboard.ErrUnknownBackend) {
			return config.Config{}, nil, usage(g.nameSource(c, err))
		}
		return config.Config{}, nil, err
	}
	return c, cat, nil
}
