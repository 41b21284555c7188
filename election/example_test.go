package election_test

import (
	"context"
	"log"
	"os"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/election"
	_ "github.com/switchboard-io/switchboard/postgres"
)

// One compactor among all replicas: each runs the same code; the leader
// compacts until its context is cancelled (lease lost or shutting down).
func ExampleRun() {
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, "postgres://switchboard@db.internal:5432/switchboard", switchboard.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	leaser := cat.(switchboard.Leaser)
	identity, _ := os.Hostname() // the full pod name: never truncated
	err = election.Run(ctx, leaser, "compactor-lock", identity, election.Config{
		OnElected: func(ctx context.Context, l switchboard.Lease) {
			log.Printf("leading with fencing token %d", l.Token)
			<-ctx.Done() // compact here, passing l.Token with every write
		},
		OnLost: func() { log.Print("no longer leading") },
	})
	if err != nil {
		log.Fatal(err)
	}
}
