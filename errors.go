package switchboard

import (
	"errors"
	"fmt"

	"github.com/switchboard-io/switchboard/internal/textcut"
)

// Sentinel errors callers branch on with errors.Is.
var (
	ErrNotFound       = errors.New("not found")
	ErrInvalid        = errors.New("invalid")
	ErrInvalidName    = fmt.Errorf("%w name", ErrInvalid)
	ErrInvalidAddress = fmt.Errorf("%w address", ErrInvalid)
	ErrInvalidDSN     = fmt.Errorf("%w dsn", ErrInvalid)
	ErrClosed         = errors.New("catalog closed")
	ErrLeaseHeld      = errors.New("lease held by another holder")
	ErrLeaseLost      = errors.New("lease lost")
	ErrUnknownBackend = errors.New("unknown catalog backend")
	// ErrBusy says a write waited its whole time for a lock another
	// process holds (stopped or hung); the write did not happen.
	ErrBusy = errors.New("catalog busy")
	// ErrNoCatalog says there is no catalog where an existing one was
	// asked for (Options.MustExist): nothing has registered there yet. A
	// PostgreSQL catalog also says it of reads made while its tables are
	// gone (the database restarted empty): the next registration or
	// heartbeat creates them again.
	ErrNoCatalog = errors.New("no catalog")
	// ErrUnreachable says the catalog's server could not be reached.
	ErrUnreachable = errors.New("cannot reach the catalog")
)

// FieldError says which field of an input is wrong and why. It wraps one of
// the ErrInvalid sentinels.
type FieldError struct {
	Field  string
	Value  string
	Reason string
	kind   error
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("%s %q: %s", e.Field, textcut.Cut(e.Value, 80), e.Reason)
}

// Unwrap returns the sentinel (ErrInvalidName, ErrInvalidAddress, …).
func (e *FieldError) Unwrap() error {
	if e.kind == nil {
		return ErrInvalid
	}
	return e.kind
}

// NewFieldError returns the FieldError on field, wrapping kind (ErrInvalid
// or a sentinel that wraps it, such as ErrInvalidName; nil is ErrInvalid).
// A client of a remote catalog uses it to give back the FieldError its
// server reported.
func NewFieldError(kind error, field, value, reason string) *FieldError {
	return &FieldError{Field: field, Value: value, Reason: reason, kind: kind}
}

func invalid(kind error, field, value, reason string) error {
	return &FieldError{Field: field, Value: value, Reason: reason, kind: kind}
}
