package resolver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/discovery"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/resolver"
	"github.com/switchboard-io/switchboard/router"
	_ "github.com/switchboard-io/switchboard/sqlite"
)

const waitFor = 30 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type server struct {
	addr  string
	lis   *testkit.CountingListener
	calls atomic.Int64
}

func startServer(t *testing.T) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: l.Addr().String(), lis: &testkit.CountingListener{Listener: l}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.Serve(ctx, s.lis, func(ctx context.Context, m *router.Message) ([]byte, error) {
			s.calls.Add(1)
			return m.Payload, nil
		}, grpcwire.ServerOptions{Logger: quiet, GracePeriod: time.Second})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func register(t *testing.T, cat switchboard.Catalog, id, name string, caps []string, addr string, ttl time.Duration) {
	t.Helper()
	_, err := cat.Register(context.Background(), switchboard.Instance{
		ID: id, Name: name, Type: "module", Address: addr, Capabilities: caps, TTL: ttl,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolverBalancesAndFollowsTheCatalog runs a plain grpc-go client on
// "switchboard:///blob-store" against a real SQLite catalog.
func TestResolverBalancesAndFollowsTheCatalog(t *testing.T) {
	cat := testkit.OpenSQLite(t)
	s1, s2, s3, s4 := startServer(t), startServer(t), startServer(t), startServer(t)
	// Two by capability, one by name; plus one unrelated and a nats:// one.
	register(t, cat, "i1", "svc-a", []string{"blob-store"}, s1.addr, time.Hour)
	register(t, cat, "i2", "svc-b", []string{"blob-store", "other"}, s2.addr, time.Hour)
	register(t, cat, "i3", "blob-store", nil, s3.addr, time.Hour)
	register(t, cat, "ix", "svc-x", []string{"unrelated"}, s4.addr, time.Hour)
	register(t, cat, "in", "svc-n", []string{"blob-store"}, "nats://tinymodule.svc-n.msg", time.Hour)

	cache, err := discovery.New(context.Background(), cat, discovery.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	cc, err := grpc.NewClient(resolver.Target("blob-store"),
		grpc.WithResolvers(resolver.NewBuilder(cache, resolver.Options{Logger: quiet})),
		grpc.WithDefaultServiceConfig(resolver.RoundRobin),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := modulepb.NewModuleServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	call := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if _, err := client.Message(ctx, &modulepb.MessageRequest{To: "f.blob-store.n"}, grpc.WaitForReady(true)); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot := func() [4]int64 {
		return [4]int64{s1.calls.Load(), s2.calls.Load(), s3.calls.Load(), s4.calls.Load()}
	}

	// All three receive calls (round_robin reaches every ready backend).
	testkit.WaitUntil(t, "every backend to receive calls", func() bool {
		call(3)
		return s1.calls.Load() > 0 && s2.calls.Load() > 0 && s3.calls.Load() > 0
	})
	before := snapshot()
	call(30)
	after := snapshot()
	for i := 0; i < 3; i++ {
		if after[i] == before[i] {
			t.Fatalf("backend %d got none of 30 calls: %v → %v", i+1, before, after)
		}
	}
	if s4.calls.Load() != 0 {
		t.Fatal("an instance without the capability or name received calls")
	}

	// Deregistered: no further calls reach it.
	if err := cat.Deregister(ctx, "i2"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, "the removed backend's connection to close", func() bool { return s2.lis.Open.Load() == 0 })
	n2 := s2.calls.Load()
	call(30)
	if s2.calls.Load() != n2 {
		t.Fatalf("deregistered backend still received %d calls", s2.calls.Load()-n2)
	}

	// A new registration receives calls.
	register(t, cat, "i4", "svc-d", []string{"blob-store"}, s4.addr, 2*time.Second)
	testkit.WaitUntil(t, "the new backend to receive calls", func() bool {
		call(3)
		return s4.calls.Load() > 0
	})

	// It stops heartbeating: once expired, no further calls reach it.
	testkit.WaitUntil(t, "the expired backend's connection to close", func() bool { return s4.lis.Open.Load() == 0 })
	n4 := s4.calls.Load()
	call(30)
	if s4.calls.Load() != n4 {
		t.Fatalf("expired backend still received %d calls", s4.calls.Load()-n4)
	}
	if s1.calls.Load() == after[0] || s3.calls.Load() == after[2] {
		t.Fatal("remaining backends stopped receiving calls")
	}
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in          string
		key         string
		capb, nameb bool
		ok          bool
	}{
		{"storage", "storage", true, true, true},
		{"/storage", "storage", true, true, true},
		{"trace.v2", "trace.v2", true, false, true},
		{"Storage", "Storage", true, false, true},
		{"", "", false, false, false},
		{"a b", "a b", false, false, false},
		{"-x", "-x", false, false, false},
	} {
		key, c, n, err := resolver.ParseKey(tc.in)
		if key != tc.key || c != tc.capb || n != tc.nameb || (err == nil) != tc.ok {
			t.Errorf("ParseKey(%q) = %q %v %v %v", tc.in, key, c, n, err)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"storage", "/x", "", "a.b:c", "UP", "-", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, c, n, err := resolver.ParseKey(s)
		if err != nil {
			if c || n {
				t.Fatal("error with a usable key")
			}
			return
		}
		if c && switchboard.ValidateCapability(key) != nil {
			t.Fatalf("%q is not a capability", key)
		}
		if n && !switchboard.IsSanitized(key) {
			t.Fatalf("%q is not a name", key)
		}
	})
}
