// Package backend holds the input rules every catalog backend applies the
// same way before it writes (a TTL against the catalog's maximum, the ids of
// one heartbeat, a lease TTL, a check result), so that the same call is
// valid or refused alike on SQLite, PostgreSQL, kube:// and remote, with the
// same error; and the rules the SQL backends share for what they store (how
// a stored check is read, the schema's compat version, the wait of an
// exclusive migration for older writers).
// Library users do not need it: Catalog methods apply it.
package backend

import (
	"fmt"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/millis"
)

// ValidateTTL checks an instance's TTL against the catalog's maximum (zero
// ttl: the catalog's default, always valid).
func ValidateTTL(d, maxTTL time.Duration) error {
	if d > maxTTL {
		return switchboard.NewFieldError(switchboard.ErrInvalid, "ttl", d.String(), fmt.Sprintf("must be at most %s (the catalog's max_ttl)", maxTTL))
	}
	return nil
}

// ValidateHeartbeatIDs checks the ids of one Heartbeat call: at most
// switchboard.MaxHeartbeatIDs, each a valid id. Backends check them all
// before renewing any.
func ValidateHeartbeatIDs(ids []string) error {
	if len(ids) > switchboard.MaxHeartbeatIDs {
		return switchboard.NewFieldError(switchboard.ErrInvalid, "ids", "", fmt.Sprintf("%d given in one heartbeat; at most %d", len(ids), switchboard.MaxHeartbeatIDs))
	}
	for i, id := range ids {
		if err := switchboard.ValidateID(id); err != nil {
			fe := err.(*switchboard.FieldError)
			fe.Field = fmt.Sprintf("ids[%d]", i)
			return fe
		}
	}
	return nil
}

// LeaseTTLMillis checks a lease TTL and returns it in whole milliseconds,
// rounded up, as every Leaser stores it (the rule of instance TTLs too:
// millis.Round): under a millisecond (or negative) is ErrInvalid; past the
// largest whole-millisecond Duration (about 292 years) it is cut to that.
func LeaseTTLMillis(d time.Duration) (int64, error) {
	if d < time.Millisecond {
		return 0, fmt.Errorf("%w: lease ttl %s must be at least 1ms", switchboard.ErrInvalid, d)
	}
	return millis.Ceil(d), nil
}
