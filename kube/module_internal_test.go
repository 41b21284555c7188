package kube

import (
	"context"
	"testing"
)

// TestLateStartedLeadingIsIgnored: client-go runs OnStartedLeading in a
// goroutine of its own, so it can run after the term is over and after
// OnStoppedLeading. Such a late start must not leave the replica believing
// it leads (it would publish status, and say it leads, until its next
// term).
func TestLateStartedLeadingIsIgnored(t *testing.T) {
	m := &Module{publish: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	// The term starts and ends in order: the replica leads, then not.
	m.startedLeading(ctx)
	if m.term() == nil {
		t.Fatal("a started term does not lead")
	}
	cancel()
	m.stoppedLeading()
	if m.term() != nil {
		t.Fatal("a stopped term still leads")
	}
	// client-go cancels the term, then calls OnStoppedLeading; the
	// goroutine running OnStartedLeading is scheduled only now.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	m.stoppedLeading()
	m.startedLeading(ctx2)
	if m.term() != nil {
		t.Fatal("an OnStartedLeading that ran after OnStoppedLeading left the replica leading")
	}
}
