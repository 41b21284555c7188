//go:build (amd64 || arm64) && !purego

package discovery

// prefetch asks the processor to bring p's cache line into its caches,
// without waiting for it: the instruction retires at once, and a load of
// the line later finds it there, or already on its way.
//
//go:noescape
func prefetch(p *rec)
