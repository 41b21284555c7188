package checks

import (
	"testing"

	"github.com/switchboard-io/switchboard"
)

// TestStreak: a check turns critical after Failures failed probes in a
// row, back after Successes good ones in a row (to warning for a warning
// probe), between passing and warning at once; a probe like the status
// changes nothing, and no status is passing already.
func TestStreak(t *testing.T) {
	const (
		p = switchboard.StatusPassing
		w = switchboard.StatusWarning
		c = switchboard.StatusCritical
	)
	check := switchboard.Check{Failures: 2, Successes: 3}
	for _, tc := range []struct {
		name   string
		status switchboard.Status
		probes []switchboard.Status
		want   []switchboard.Status // what each probe moves the status to
	}{
		{"failures in a row", p, []switchboard.Status{c, p, c, c, c}, []switchboard.Status{"", "", "", c, ""}},
		{"successes in a row", c, []switchboard.Status{p, p, c, p, p, p}, []switchboard.Status{"", "", "", "", "", p}},
		{"back to warning", c, []switchboard.Status{w, p, w}, []switchboard.Status{"", "", w}},
		{"passing and warning at once", p, []switchboard.Status{w, w, p}, []switchboard.Status{w, "", p}},
		{"no status", "", []switchboard.Status{p}, []switchboard.Status{""}},
		{"no status, warning", "", []switchboard.Status{w}, []switchboard.Status{w}},
	} {
		var s streak
		status := tc.status
		for i, res := range tc.probes {
			to := s.next(check, status, res)
			if to != tc.want[i] {
				t.Errorf("%s: probe %d (%s) from %q moves to %q, want %q", tc.name, i, res, status, to, tc.want[i])
			}
			if to != "" {
				status = to
			}
		}
	}
}
