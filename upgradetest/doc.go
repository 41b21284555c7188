// Package upgradetest runs two real releases of switchboard side by side:
// the release users run today, built from the repository's own history,
// and the working tree, each with a leaser (testdata/leaser) built against
// its own library. Its tests check what a rolling upgrade relies on (see
// docs/upgrades.md), on SQLite and on PostgreSQL:
//
//   - old processes running while a new one migrates the catalog, and an
//     instance restarted on the new binary keeping its id with no watcher
//     seeing it removed;
//   - old servers with new clients and the reverse, and an old and a new
//     server sharing one catalog;
//   - leases held by one release against the other's contender, directly
//     and through either server, both ways;
//   - the module wires (gRPC, NATS request/reply, JetStream on a broker of
//     the test's own) between an old echo and a new send and the reverse,
//     and the old side ignoring what a newer peer adds to them.
//
// The package holds only tests.
package upgradetest
