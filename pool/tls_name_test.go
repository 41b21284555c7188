package pool

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// TestServerCertificateMustNameTheAddressDialled: a certificate signed by
// the trusted CA but issued for another host is refused — also when the
// module is dialled at an IP address, where crypto/tls's own state names
// no server and an unchecked name would let any certificate of the CA
// (another module's, a client's) impersonate the module.
func TestServerCertificateMustNameTheAddressDialled(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	elsewhere := ca.IssueFor(t, "named server", []string{"billing.internal"}, []net.IP{net.IPv4(10, 9, 8, 7)})
	addr := startTLS(t, router.Echo, newTLS(t, dir, nil, &elsewhere, "elsewhere-"))
	_, port, _ := net.SplitHostPort(addr)

	named := ca.IssueFor(t, "named server", []string{"localhost"}, nil)
	namedAddr := startTLS(t, router.Echo, newTLS(t, dir, nil, &named, "named-"))
	_, namedPort, _ := net.SplitHostPort(namedAddr)

	client := newTLS(t, dir, ca, nil, "client-")
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:" + port, false},
		{"localhost:" + port, false},
		{"localhost:" + namedPort, true},
		{"127.0.0.1:" + namedPort, false}, // the certificate names localhost, not the IP
	} {
		p := newPool(t, Options{TLS: client})
		p.Register("secure", tc.addr)
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		out, err := p.Send(ctx, &router.Message{To: "f.secure.n:in", Payload: []byte("hi")})
		cancel()
		if tc.ok {
			if err != nil || string(out) != "hi" {
				t.Errorf("%s: %q, %v; want the echo", tc.addr, out, err)
			}
			continue
		}
		var e *router.Error
		if !errors.As(err, &e) || e.Code != grpcwire.CodeTLS || e.Retryable || !strings.Contains(err.Error(), "not issued for the host dialled") {
			t.Errorf("%s: got %q, %v; want a permanent %s saying the certificate is not issued for the host", tc.addr, out, err, grpcwire.CodeTLS)
		}
	}
}
