//go:build unix

package discovery

import (
	"os"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard/internal/cputime"
)

// BenchmarkFaultFloor measures what this host charges for the first touch
// of a page of memory (one op): a write to each page of a fresh anonymous
// mapping, which the kernel must find, zero and map (on a virtual machine,
// possibly after the host does the same for the guest's page). It is the
// floor under a growing heap: a process whose heap grows by one page pays
// it once per page, and a change the cache applies while its heap grows
// pays it for every page of the copies it makes (BenchmarkApplyTail's
// "fresh").
func BenchmarkFaultFloor(b *testing.B) {
	page := os.Getpagesize()
	const perMap = 1 << 14 // pages mapped at a time: 64 MiB of 4 KiB pages
	flt := cputime.MinorFaults()
	var m []byte
	off := 0
	for b.Loop() {
		if off == len(m) {
			if m != nil {
				syscall.Munmap(m)
			}
			var err error
			m, err = syscall.Mmap(-1, 0, perMap*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				b.Fatal(err)
			}
			off = 0
		}
		m[off] = 1
		off += page
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.MinorFaults()-flt)/float64(b.N), "faults/op")
	if m != nil {
		syscall.Munmap(m)
	}
}
