package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the live catalog to dst (SQLite's
// VACUUM INTO: one read transaction, so writers carry on meanwhile), as a
// self-contained file. dst must not exist; the copy is written next to it
// and renamed into place, so dst is never a partial file.
//
// The copy gets an epoch of its own: restored, it is another history than
// the catalog it was taken from, whose log has moved on since, so watchers
// resync from a snapshot instead of reading its log as a continuation.
func (c *Catalog) Backup(ctx context.Context, dst string) error {
	if c.closed.Load() {
		return errClosed("backup")
	}
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("sqlite: backup to %s: %w", dst, err)
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("sqlite: backup to %s: %w (name a new file)", abs, os.ErrExist)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sqlite: backup to %s: %w", abs, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), filepath.Base(abs)+".partial-*")
	if err != nil {
		return fmt.Errorf("sqlite: backup to %s: %w", abs, err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	os.Remove(tmpName) // VACUUM INTO wants to create the file itself
	defer os.Remove(tmpName)

	d, done := c.opening(ctx)
	err = c.retry(ctx, func() error {
		_, err := d.rdb.ExecContext(ctx, `VACUUM INTO ?`, tmpName)
		return err
	})
	done()
	if err != nil {
		return fmt.Errorf("sqlite: backup %s to %s: %w", c.where(), abs, err)
	}
	if err := newEpoch(ctx, tmpName); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %w", abs, err)
	}
	// Link, not rename: it fails rather than replace a file created at dst
	// meanwhile.
	if err := os.Link(tmpName, abs); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %w", abs, err)
	}
	return nil
}

// newEpoch gives the catalog file at path a new epoch (the file is not in
// use by anyone).
func newEpoch(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE meta SET value = random() WHERE key = 'epoch'`)
	return err
}
