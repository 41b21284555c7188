package pool

import (
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-io/switchboard"
)

// FuzzDialTarget: every address the pool dials (switchboard.IsDialable)
// becomes a gRPC target that grpc.NewClient accepts and whose endpoint is
// the address itself — no resolver scheme read out of the host, no zone
// lost to URL escaping — and nothing panics on any input.
func FuzzDialTarget(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:8080", "[::1]:9000", "[fe80::1%eth0]:8080", "unix:8080", "dns:53",
		"passthrough:9000", "host.example.:443", "a-b_c.d:1", "nats://tinymodule.x.msg", "", ":80",
		"[fe80::1%25eth0]:1", "h:0", "h:65535", "h:99999", "x%y:1", "[::1]", "a b:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		target := dialTarget(addr)
		if !switchboard.IsDialable(addr) {
			return
		}
		u, err := url.Parse(target)
		if err != nil {
			t.Fatalf("dialable %q: target %q does not parse: %v", addr, target, err)
		}
		if u.Scheme != "dns" || strings.TrimPrefix(u.Path, "/") != addr {
			t.Fatalf("dialable %q: target %q has scheme %q and endpoint %q", addr, target, u.Scheme, u.Path)
		}
		cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatalf("dialable %q: grpc.NewClient(%q): %v", addr, target, err)
		}
		cc.Close()
	})
}
