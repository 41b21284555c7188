//go:build race

package dashboard_test

// raceEnabled: under -race every SQLite write (a pure-Go SQLite) costs
// many times more, so the tests that load a fleet load a smaller one.
const raceEnabled = true
