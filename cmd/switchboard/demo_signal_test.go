package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard"
)

// TestDemoInterruptLeavesNothing: Ctrl-C while the demo waits for its
// "crashed" writer to expire ends it cleanly (exit 0) and deregisters
// everything it registered, the writer's row included: an interrupted demo
// leaves no row behind in a shared catalog. A real process, a real signal.
func TestDemoInterruptLeavesNothing(t *testing.T) {
	dsn, _ := dsnIn(t)
	// A long TTL: the demo is still waiting for the writer to expire when
	// it is interrupted.
	p := start(t, "demo", "--dsn", dsn, "--ttl", "10m", "--heartbeat", "1s")
	waitOutput(t, p, "3. the writer is killed")
	cat := openCatalog(t, dsn)
	ctx := context.Background()
	list, err := cat.List(ctx, switchboard.Query{All: true})
	if err != nil || len(list) != 5 {
		t.Fatalf("before the interrupt: %d rows (%v), want the 5 roles", len(list), err)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	var rest strings.Builder
	for l := range p.lines {
		rest.WriteString(l + "\n")
	}
	if err := <-p.done; err != nil {
		t.Fatalf("demo exit after Ctrl-C: %v\nstdout:\n%s\nstderr:\n%s", err, rest.String(), p.stderr)
	}
	list, err = cat.List(ctx, switchboard.Query{All: true})
	if err != nil || len(list) != 0 {
		var names []string
		for _, in := range list {
			names = append(names, in.Name)
		}
		t.Fatalf("rows left behind by the interrupted demo: %v (%v)", names, err)
	}
}
