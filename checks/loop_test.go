package checks

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
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

// stallingSetter holds every SetHealth until release is closed (or the
// call's context ends).
type stallingSetter struct {
	switchboard.Catalog
	release chan struct{}
	calls   atomic.Int32
}

func (s *stallingSetter) SetHealth(ctx context.Context, id string, h switchboard.Health) (switchboard.Instance, error) {
	s.calls.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
		return switchboard.Instance{}, ctx.Err()
	}
	return s.Catalog.(switchboard.HealthSetter).SetHealth(ctx, id, h)
}

// TestHeldUpCheckSkipsSlots: while a check's last result is still being
// written, its next slots pass without a probe (never two probes of one
// check at once); once the write is done, probing resumes.
func TestHeldUpCheckSkipsSlots(t *testing.T) {
	tg := newTarget(t)
	st := &stallingSetter{Catalog: testkit.OpenSQLite(t), release: make(chan struct{})}
	register(t, st, switchboard.Instance{ID: "web-1", Name: "web", Address: tg.addr(),
		Check: &switchboard.Check{Target: tg.srv.URL + "/health", Interval: time.Second}})
	var probes atomic.Int32
	run(t, st, Options{probed: func(_, _ string, _, _ time.Time) { probes.Add(1) }})
	// The first probe passes; recording it stalls.
	testkit.WaitUntil(t, "the first status change", func() bool { return st.calls.Load() == 1 })
	time.Sleep(2500 * time.Millisecond) // two slots and more
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d probes while the first result was being written, want 1", n)
	}
	close(st.release)
	testkit.WaitUntil(t, "a probe after the write", func() bool { return probes.Load() >= 2 })
}
