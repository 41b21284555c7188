//go:build race

package main

// raceEnabled builds the subprocess CLI with the race detector too when the
// tests run under it.
const raceEnabled = true
