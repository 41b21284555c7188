//go:build unix

package cputime

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestMinorFaultsCountsFreshPages checks that touching every page of
// 64 MiB the process never had before adds at least 32 faults: one per
// 2 MiB, what it takes even if the kernel backs the memory with huge pages
// (with 4 KiB pages it is about 16,000). A MinorFaults that stands still
// or counts something else fails it. The process's free memory goes back
// to the system first, so that the allocation cannot reuse pages an
// earlier run of the test touched.
func TestMinorFaultsCountsFreshPages(t *testing.T) {
	const size = 64 << 20
	debug.FreeOSMemory()
	before := MinorFaults()
	b := make([]byte, size) // a large object: memory the process holds no page of
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	got := MinorFaults() - before
	runtime.KeepAlive(b)
	if got < size/(2<<20) {
		t.Fatalf("touching %d MiB of fresh memory took %d faults, want at least %d", size>>20, got, size/(2<<20))
	}
}
