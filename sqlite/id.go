package sqlite

import "github.com/google/uuid"

// The ids this package generates (a Register without an id) are UUID v4,
// as the spec says, with one difference in where their random bits come
// from: the first four bytes are drawn once per handle, the other 90
// random bits per id. The instances table is a B-tree keyed by id, so the
// rows one handle registered sit side by side in a few pages instead of one
// page each: a process's heartbeat of its 50 registrations rewrites ~5
// table pages, not ~50, which is most of what a heartbeat costs the
// writer, its write lock and the WAL (issue 8's fleet of 200 processes).
// Ids stay unique with overwhelming probability (90 random bits within a
// handle; 122 bits across handles, as before); ids a caller gives are kept
// as they are.

// idSource generates a handle's ids.
type idSource struct {
	prefix [4]byte
}

func newIDSource() idSource {
	u := uuid.New()
	var s idSource
	copy(s.prefix[:], u[:4])
	return s
}

// next returns a new UUID v4 that starts with the handle's prefix.
func (s idSource) next() string {
	u := uuid.New()
	copy(u[:4], s.prefix[:])
	return u.String()
}
