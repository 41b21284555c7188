package pool

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// issueFor makes a server certificate signed by ca for exactly these DNS
// names and IP addresses.
func issueFor(t *testing.T, ca *testkit.CA, dns []string, ips []net.IP) testkit.Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "named server"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
		Serial:  tmpl.SerialNumber,
	}
}

// TestServerCertificateMustNameTheAddressDialled: a certificate signed by
// the trusted CA but issued for another host is refused — also when the
// module is dialled at an IP address, where crypto/tls's own state names
// no server and an unchecked name would let any certificate of the CA
// (another module's, a client's) impersonate the module.
func TestServerCertificateMustNameTheAddressDialled(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	elsewhere := issueFor(t, ca, []string{"billing.internal"}, []net.IP{net.IPv4(10, 9, 8, 7)})
	addr := startTLS(t, router.Echo, newTLS(t, dir, nil, &elsewhere, "elsewhere-"))
	_, port, _ := net.SplitHostPort(addr)

	named := issueFor(t, ca, []string{"localhost"}, nil)
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
