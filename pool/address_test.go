package pool

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/router"
)

// TestIPv6ZoneAddressIsDialled: a link-local IPv6 address with its zone
// ("[fe80::1%eth0]:8080", which switchboard.ValidateAddress accepts) is
// dialled like any host:port. grpc-go reads the target as a URL, where a
// bare '%' is an invalid escape: the pool used to fail every send with a
// permanent not_dialable.
func TestIPv6ZoneAddressIsDialled(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	lo := loopbackName(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcwire.Serve(ctx, l, router.Echo, grpcwire.ServerOptions{Logger: quiet})
	}()
	t.Cleanup(func() { cancel(); <-done })
	addr := "[::1%" + lo + "]:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if !switchboard.IsDialable(addr) {
		t.Fatalf("%s is not dialable", addr)
	}
	p := newPool(t, Options{})
	p.Register("mod-z", addr)
	if out, err := send(ctx, p, "f.mod-z.n:in", "x"); err != nil || out != "x" {
		t.Fatalf("send to %s: %q, %v", addr, out, err)
	}
}

func loopbackName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}

// TestHostNamedLikeAResolverScheme: "unix:8080" is the host "unix" on port
// 8080 to the catalog (a Service or host named unix, dns, passthrough…),
// but grpc-go reads a target "unix:8080" as its unix-socket resolver (and
// "dns:8080", "passthrough:8080" likewise). The pool must resolve every
// address as a host name. A DNS resolver that answers every name with the
// test server stands in for the name service here.
func TestHostNamedLikeAResolverScheme(t *testing.T) {
	srv := startServer(t, nil)
	for _, host := range []string{"unix", "passthrough", "dns", "unix-abstract"} {
		t.Run(host, func(t *testing.T) {
			dns := manual.NewBuilderWithScheme("dns")
			dns.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: srv.addr}}})
			p := newPool(t, Options{DialOptions: []grpc.DialOption{grpc.WithResolvers(dns)}})
			_, port, _ := net.SplitHostPort(srv.addr)
			addr := host + ":" + port
			if !switchboard.IsDialable(addr) {
				t.Fatalf("%s is not dialable", addr)
			}
			p.Register("mod-h", addr)
			if out, err := send(context.Background(), p, "f.mod-h.n:in", "x"); err != nil || out != "x" {
				t.Fatalf("send to %s: %q, %v", addr, out, err)
			}
		})
	}
}

// TestSendNilMessage: a nil message is refused with a permanent error, not
// a panic.
func TestSendNilMessage(t *testing.T) {
	p := newPool(t, Options{})
	_, err := p.Send(context.Background(), nil)
	if e := router.AsError(err); e == nil || e.Retryable {
		t.Fatalf("Send(nil) = %v, want a permanent error", err)
	}
}

// TestInvalidAddressErrorSaysWhy: a module registered at an address that is
// not host:port (empty, no port, a bare IPv6) is not dialled, and a send to
// it says what is wrong with the address, not only that the gRPC wire does
// not dial it (which read "known only at , which …" for an empty one).
func TestInvalidAddressErrorSaysWhy(t *testing.T) {
	p := newPool(t, Options{})
	for addr, want := range map[string]string{
		"":                   "must not be empty",
		"localhost":          "missing port",
		"::1:8080":           "brackets",
		"http://host:80":     "scheme",
		"nats://tinymod.x.y": `"nats://tinymod.x.y", which the gRPC wire does not dial`,
	} {
		p.Register("mod-bad", addr)
		_, err := send(context.Background(), p, "f.mod-bad.n:in", "x")
		e := router.AsError(err)
		if e == nil || e.Code != router.CodeNotDialable || e.Retryable || !strings.Contains(e.Message, want) {
			t.Errorf("send to a module at %q: %v; want not_dialable saying %q", addr, err, want)
		}
	}
	if c := p.Connections(); len(c) != 0 {
		t.Fatalf("connections: %v", c)
	}
}

// silent is a catalog whose watch never delivers anything (a catalog
// still connecting).
type silent struct{ switchboard.Catalog }

func (silent) Watch(ctx context.Context, q switchboard.Query) (<-chan switchboard.Event, error) {
	return make(chan switchboard.Event), nil
}

// TestFollowEndedByClose: a Follow still waiting for the catalog's first
// sync when the pool closes returns ErrClosed, as one started after Close
// does, not the context.Canceled its caller never caused.
func TestFollowEndedByClose(t *testing.T) {
	p := newPool(t, Options{})
	errc := make(chan error, 1)
	go func() { errc <- p.Follow(context.Background(), silent{}, switchboard.Query{}) }()
	time.Sleep(20 * time.Millisecond) // let it wait; either order must give ErrClosed
	p.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Follow ended by Close: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Follow did not return after Close")
	}
}
