package cputime

import (
	"testing"
	"time"
)

// TestProcessCountsWork checks that the process's CPU time is positive and
// grows while this goroutine computes. It waits for 10 ms of CPU with a
// generous bound (20 s of wall time), so a loaded machine cannot fail it;
// a Process that returns 0 or stands still does.
func TestProcessCountsWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v: a process that ran has used some CPU", before)
	}
	x := 0
	for deadline := time.Now().Add(20 * time.Second); Process() < before+10*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("Process() went from %v to %v over 20 s of a busy loop (x=%d)", before, Process(), x)
		}
		for i := range 100000 {
			x += i
		}
	}
}
