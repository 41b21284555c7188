// This file continues the package comment of switchboard.go: how a program
// uses the library.

// The entry point of the library, in three calls:
//
//	import (
//		"github.com/switchboard-io/switchboard"
//		"github.com/switchboard-io/switchboard/discovery"
//		_ "github.com/switchboard-io/switchboard/sqlite" // the backend of sqlite:// DSNs
//	)
//
//	cat, err := switchboard.Open(ctx, "sqlite://.data/switchboard.db", switchboard.Options{})
//	reg, err := switchboard.Bootstrap(ctx, cat, switchboard.Instance{…}, switchboard.BootstrapOptions{})
//	cache, err := discovery.New(ctx, cat, discovery.Options{})
//
// Open chooses the backend by the DSN's scheme, and the backend must be
// linked into the program by a blank import: sqlite for sqlite://,
// postgres for postgres://, remote for http:// and https:// (a
// `switchboard serve`), kube for kube://. Without it Open fails with
// ErrUnknownBackend. Bootstrap registers an instance and keeps it alive
// until its Registration is closed; discovery.New keeps every active
// instance in memory for lookups, current through the catalog's Watch.
// The guides are in the repository's docs/ directory; docs/design.md
// explains how the pieces fit.
package switchboard
