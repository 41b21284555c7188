// Package cputime reads the CPU time this process has used (user and
// system, every thread, the garbage collector's included): what the
// project's benchmarks report as cores next to wall-clock figures. It
// also counts the process's page faults, which on a virtual machine can
// be a large part of that CPU (each first touch of a fresh page).
package cputime

import "time"

// Process returns the CPU time this process has used so far, or 0 where the
// system does not say (neither unix nor Windows) or the call fails (which
// getrusage and GetProcessTimes do not for the calling process). A
// benchmark that reports a difference of two readings thus reports 0 CPU,
// not a wrong figure, where it cannot measure.
func Process() time.Duration { return process() }

// MinorFaults returns how many page faults this process has taken so far
// that needed no read from disk (on Linux, mostly a first touch of a fresh
// page of memory: the kernel finds, zeroes and maps a page), or 0 where the
// system does not say (outside unix) or the call fails.
func MinorFaults() int64 { return minorFaults() }
