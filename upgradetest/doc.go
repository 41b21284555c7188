// Package upgradetest runs two real releases of switchboard side by side:
// the release users run today, built from the repository's own history,
// and the working tree. Its tests check what a rolling upgrade relies on
// (see docs/upgrades.md): old servers with new clients and the reverse,
// old processes running while a new one migrates a shared SQLite file or
// PostgreSQL schema,
// and an instance restarted on the new binary keeping its id with no
// watcher seeing it removed. The package holds only tests.
package upgradetest
