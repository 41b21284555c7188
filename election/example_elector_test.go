package election_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/election"
	_ "github.com/switchboard-io/switchboard/sqlite" // the embedded default backend
)

// Two contenders for one lease: the first leads; when it stops, the lease
// is released and the second leads with a higher fencing token.
func ExampleNew() {
	quiet := slog.New(slog.DiscardHandler)
	dir, _ := os.MkdirTemp("", "election-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cat, err := switchboard.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"), switchboard.Options{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cat.Close()
	leaser := cat.(switchboard.Leaser)

	elected := make(chan string)
	contend := func(identity string) (stop func()) {
		e, err := election.New(leaser, "compactor", identity, election.Config{
			TTL:    2 * time.Second,
			Logger: quiet,
			OnElected: func(ctx context.Context, l switchboard.Lease) {
				elected <- fmt.Sprintf("%s leads with token %d", l.Holder, l.Token)
				<-ctx.Done() // lead until leadership ends
			},
		})
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		return func() { cancel(); <-done }
	}

	stopA := contend("pod-a")
	fmt.Println(<-elected)
	stopB := contend("pod-b")
	defer stopB()
	stopA() // releases the lease on the way out
	fmt.Println(<-elected)
	// Output:
	// pod-a leads with token 1
	// pod-b leads with token 2
}
