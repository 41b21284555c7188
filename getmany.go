package switchboard

import "context"

// MultiGetter is implemented by catalogs that read many rows by id in one
// round trip (both SQL backends: WHERE id IN …). A server checking the
// ownership of a heartbeat batch reads only the ids it names with it,
// never the whole catalog.
type MultiGetter interface {
	// GetMany returns the rows of ids that exist, stale or not, in any
	// order; an id without a row is simply absent. ids holds at most
	// MaxHeartbeatIDs ids; duplicates are allowed.
	GetMany(ctx context.Context, ids []string) ([]Instance, error)
}
