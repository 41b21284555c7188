//go:build (!amd64 && !arm64) || purego

package discovery

// prefetch does nothing where the package has no instruction for it: a
// pick then waits for its record's line as it reads it.
func prefetch(*rec) {}
