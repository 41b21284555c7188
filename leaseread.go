package switchboard

import "context"

// LeaseReader is implemented by catalogs that read leases by name and a
// page at a time (both SQL backends), so a server checking one lease's
// holder, counting leases for a quota or listing a page reads only that,
// not every lease row.
type LeaseReader interface {
	// Lease returns the lease row named name (released or expired ones
	// included); ErrNotFound when there is none.
	Lease(ctx context.Context, name string) (Lease, error)
	// LeasesAfter returns at most limit lease rows whose names sort after
	// after ("": from the first), by name.
	LeasesAfter(ctx context.Context, after string, limit int) ([]Lease, error)
	// LeaseCount returns how many lease rows there are.
	LeaseCount(ctx context.Context) (int, error)
}
