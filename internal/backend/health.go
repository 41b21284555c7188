package backend

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/storedmeta"
	"github.com/switchboard-io/switchboard/internal/textcut"
)

// NotCheckedYet is the output of the health a new row registered with a
// check starts with (critical, until its first probes pass).
const NotCheckedYet = "not checked yet"

// KeepsHealth is the rule of every backend that stores checks for the
// health of a re-registered row: kept while the row keeps a check (it had
// one and the registration has one, the same or another; only SetHealth
// writes it), and otherwise a new row's: none without a check, and with
// one (a check added) critical, NotCheckedYet, since the registration,
// since nothing has judged it yet. The draining state is always kept.
func KeepsHealth(hadCheck, hasCheck bool) bool { return hadCheck && hasCheck }

// ValidateHealth checks a check result before SetHealth stores it (a status
// of passing, warning or critical: a runner always reports one) and returns
// it as every backend stores it: its output with NUL bytes replaced by
// U+FFFD (text PostgreSQL cannot hold) and cut to
// switchboard.MaxHealthOutput bytes. Since is the backend's to stamp.
func ValidateHealth(h switchboard.Health) (switchboard.Health, error) {
	switch h.Status {
	case switchboard.StatusPassing, switchboard.StatusWarning, switchboard.StatusCritical:
	default:
		return switchboard.Health{}, switchboard.NewFieldError(switchboard.ErrInvalid, "health.status", string(h.Status),
			"must be passing, warning or critical")
	}
	out := strings.ReplaceAll(h.Output, "\x00", "\uFFFD")
	if !utf8.ValidString(out) {
		out = strings.ToValidUTF8(out, "\uFFFD")
	}
	h.Output = textcut.Fit(out, switchboard.MaxHealthOutput)
	return h, nil
}

// ReadCheck decodes a stored check (its JSON text, as Register stores it;
// nil: no check) of the row of instance id. A document the backends did
// not write (another tool's) that does not read as a check is read as no
// check, not refused, so that one such row does not fail every read; it is
// noted through ml as metadata of another form is.
func ReadCheck(id string, spec []byte, ml *storedmeta.Log) *switchboard.Check {
	if spec == nil {
		return nil
	}
	var ck switchboard.Check
	if err := json.Unmarshal(spec, &ck); err != nil {
		ml.Note(id, fmt.Sprintf("check %q does not read as a check (%v): read as no check", textcut.Cut(string(spec), 80), err))
		return nil
	}
	return &ck
}

// ValidateRemoval checks the reason of a switchboard.Remover's Remove:
// deregistered or check_critical.
func ValidateRemoval(reason switchboard.Reason) error {
	switch reason {
	case switchboard.ReasonDeregistered, switchboard.ReasonCheckCritical:
		return nil
	}
	return switchboard.NewFieldError(switchboard.ErrInvalid, "reason", string(reason), "must be deregistered or check_critical")
}
