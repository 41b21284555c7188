package backend

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-io/switchboard"
)

func TestValidateHealth(t *testing.T) {
	for _, s := range []switchboard.Status{"", "bogus", switchboard.StatusDraining, "Passing"} {
		_, err := ValidateHealth(switchboard.Health{Status: s})
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "health.status" || !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("status %q: %v, want an invalid health.status", s, err)
		}
	}
	for _, out := range []string{"", "ok", "a\x00b", strings.Repeat("\x00", switchboard.MaxHealthOutput), "bad \xff" + strings.Repeat("é", switchboard.MaxHealthOutput)} {
		h, err := ValidateHealth(switchboard.Health{Status: switchboard.StatusCritical, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Output) > switchboard.MaxHealthOutput || !utf8.ValidString(h.Output) || strings.IndexByte(h.Output, 0) >= 0 {
			t.Errorf("output %q stored as %q", out, h.Output)
		}
		if len(out) <= 8 && h.Output != strings.ReplaceAll(out, "\x00", "\uFFFD") {
			t.Errorf("short output %q stored as %q", out, h.Output)
		}
	}
}
