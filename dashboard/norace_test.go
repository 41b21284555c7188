//go:build !race

package dashboard_test

// raceEnabled: see race_test.go.
const raceEnabled = false
