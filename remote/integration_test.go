package remote_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/election"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/remote"
)

// TestDiscoveryOverServer: the discovery cache follows a remote catalog,
// and goes stale (serving the last set) while the server is unreachable.
func TestDiscoveryOverServer(t *testing.T) {
	ctx := context.Background()
	url, _ := serve(t, testkit.OpenSQLite(t), httpapi.Options{})
	p := testkit.NewProxy(t, url[len("http://"):])
	writer := client(t, url, remote.Config{})
	cache, err := discovery.New(ctx, client(t, "http://"+p.Addr(), remote.Config{}), discovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	in := inst("store")
	in.Capabilities = []string{switchboard.CapStorage}
	reg, err := switchboard.Bootstrap(ctx, writer, in, switchboard.BootstrapOptions{HeartbeatInterval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "cache to see the registration", func() bool {
		got, ok := cache.PickRoundRobin(switchboard.CapStorage)
		return ok && got.ID == reg.ID()
	})
	p.CutAll()
	testkit.WaitUntil(t, "cache to go stale", func() bool { stale, _ := cache.Stale(); return stale })
	if _, ok := cache.PickRoundRobin(switchboard.CapStorage); !ok {
		t.Fatal("stale cache dropped the last known set")
	}
	p.Restore()
	testkit.WaitUntil(t, "cache to recover", func() bool { stale, _ := cache.Stale(); return !stale })
	reg.Close()
	testkit.WaitUntil(t, "deregistration to reach the cache", func() bool {
		_, ok := cache.PickRoundRobin(switchboard.CapStorage)
		return !ok
	})
}

// TestElectionOverServer: two contenders elect through the server's
// leases; never two leaders, and the second takes over when the first
// stops.
func TestElectionOverServer(t *testing.T) {
	url, _ := serve(t, testkit.OpenSQLite(t), httpapi.Options{})
	var leaders atomic.Int32
	var twice atomic.Bool
	elected := make(chan string, 4)
	run := func(ctx context.Context, id string, wg *sync.WaitGroup) {
		defer wg.Done()
		election.Run(ctx, client(t, url, remote.Config{}), "lock", id, election.Config{
			TTL: 600 * time.Millisecond, RetryEvery: 50 * time.Millisecond, Logger: quiet,
			OnElected: func(ctx context.Context, l switchboard.Lease) {
				if leaders.Add(1) > 1 {
					twice.Store(true)
				}
				elected <- id
				<-ctx.Done()
				leaders.Add(-1)
			},
		})
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	var wg sync.WaitGroup
	wg.Add(2)
	go run(ctxA, "a", &wg)
	first := waitElected(t, elected)
	go run(ctxB, "b", &wg)
	if first != "a" {
		t.Fatalf("first leader %q", first)
	}
	stopA()
	if second := waitElected(t, elected); second != "b" {
		t.Fatalf("second leader %q", second)
	}
	stopB()
	wg.Wait()
	if twice.Load() {
		t.Fatal("two leaders at once")
	}
}

func waitElected(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("nobody elected")
	}
	return ""
}
