package pool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/switchboard-io/switchboard/grpcwire"
	"github.com/switchboard-io/switchboard/internal/testkit"
	"github.com/switchboard-io/switchboard/router"
)

// peerSerial is a handler answering with the serial number of the client
// certificate the call came with ("none" without one).
func peerSerial(ctx context.Context, m *router.Message) ([]byte, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, errors.New("no peer")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return []byte("none"), nil
	}
	return []byte(ti.State.PeerCertificates[0].SerialNumber.String()), nil
}

// startTLS serves h on loopback with TLS material t (plaintext when nil).
func startTLS(tb testing.TB, h router.Handler, t *grpcwire.TLS) string {
	tb.Helper()
	return serveWith(tb, h, grpcwire.ServerOptions{TLS: t})
}

// serveWith serves h on loopback with opts (quiet, a one-second grace).
func serveWith(tb testing.TB, h router.Handler, opts grpcwire.ServerOptions) string {
	tb.Helper()
	opts.Logger, opts.GracePeriod = quiet, time.Second
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- grpcwire.Serve(ctx, lis, h, opts)
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

func newTLS(t *testing.T, dir string, ca *testkit.CA, leaf *testkit.Leaf, prefix string) *grpcwire.TLS {
	t.Helper()
	var f grpcwire.TLSFiles
	if ca != nil {
		f.CA = testkit.WriteFile(t, dir, prefix+"ca.pem", ca.PEM)
	}
	if leaf != nil {
		f.Cert = testkit.WriteFile(t, dir, prefix+"cert.pem", leaf.CertPEM)
		f.Key = testkit.WriteFile(t, dir, prefix+"key.pem", leaf.KeyPEM)
	}
	tl, err := grpcwire.NewTLS(f)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestMutualTLSRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	srvLeaf, cliLeaf := ca.IssueValid(t, "server"), ca.IssueValid(t, "client")
	addr := startTLS(t, peerSerial, newTLS(t, dir, ca, &srvLeaf, "srv-"))
	p := newPool(t, Options{TLS: newTLS(t, dir, ca, &cliLeaf, "cli-")})
	p.Register("secure", addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	out, err := p.Send(ctx, &router.Message{To: "f.secure.n:in"})
	if err != nil || string(out) != cliLeaf.Serial.String() {
		t.Fatalf("mTLS send = %q, %v; want the client certificate's serial %s", out, err, cliLeaf.Serial)
	}
}

// TestTLSFailuresAreClearAndNotRetried: every way the two sides can fail
// to agree on transport security ends the send at once, with code
// tls_failed, an error that says what to check, and no retries even under
// a retrying policy.
func TestTLSFailuresAreClearAndNotRetried(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	other := testkit.NewCA(t, "someone else's CA")
	valid := ca.IssueValid(t, "server")
	expired := ca.Issue(t, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	client := ca.IssueValid(t, "client")
	foreign := other.IssueValid(t, "server")

	plainSrv := startTLS(t, router.Echo, nil)
	tlsSrv := startTLS(t, router.Echo, newTLS(t, dir, nil, &valid, "tls-"))
	mtlsSrv := startTLS(t, router.Echo, newTLS(t, dir, ca, &valid, "mtls-"))
	foreignSrv := startTLS(t, router.Echo, newTLS(t, dir, nil, &foreign, "foreign-"))
	expiredSrv := startTLS(t, router.Echo, newTLS(t, dir, nil, &expired, "expired-"))

	for _, tc := range []struct {
		name   string
		addr   string
		client *grpcwire.TLS // nil: plaintext
		want   string        // a fragment of the error
		tries  int           // 1: no retry; 2: retried until final
	}{
		{"TLS client, plaintext server", plainSrv, newTLS(t, dir, ca, nil, "c1-"), "TLS handshake", 1},
		// A plaintext client tells a TLS server from a server that stopped
		// while accepting only at the second connection closed before a
		// byte: the first attempt is retryable.
		{"plaintext client, TLS server", tlsSrv, nil, "require TLS", 2},
		{"server certificate from an unknown CA", foreignSrv, newTLS(t, dir, ca, nil, "c2-"), "unknown authority", 1},
		{"expired server certificate", expiredSrv, newTLS(t, dir, ca, nil, "c3-"), "expired", 1},
		{"no client certificate for a mutual-TLS server", mtlsSrv, newTLS(t, dir, ca, nil, "c4-"), "certificate", 1},
		{"expired client certificate", mtlsSrv, newTLS(t, dir, ca, &expired, "c5-"), "certificate", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, Options{TLS: tc.client})
			p.Register("secure", tc.addr)
			r := routerOver(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			// The retry waits out grpc-go's reconnect backoff (1 s ± 20 %).
			_, err := r.SendWithPolicy(ctx, &router.Message{To: "f.secure.n:in"}, router.RetryPolicy{MaxAttempts: 5, InitialDelay: 1500 * time.Millisecond})
			var e *router.Error
			if !errors.As(err, &e) || e.Code != grpcwire.CodeTLS || e.Retryable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want a permanent %s mentioning %q", err, grpcwire.CodeTLS, tc.want)
			}
			if retried := strings.Contains(err.Error(), "attempts"); retried != (tc.tries > 1) {
				t.Fatalf("retried %v, want %v: %v", retried, tc.tries > 1, err)
			}
			if ctx.Err() != nil {
				t.Fatal("the send only ended with the test's deadline")
			}
		})
	}
	// With matching material the same servers answer.
	p := newPool(t, Options{TLS: newTLS(t, dir, ca, &client, "ok-")})
	p.Register("a", tlsSrv)
	p.Register("b", mtlsSrv)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, to := range []string{"f.a.n:in", "f.b.n:in"} {
		if _, err := p.Send(ctx, &router.Message{To: to, Payload: []byte("x")}); err != nil {
			t.Fatalf("%s: %v", to, err)
		}
	}
}

// serverSerial dials addr with TLS trusting ca and returns the serial of the
// certificate the server presents.
func serverSerial(t *testing.T, addr string, ca *testkit.CA) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: waitFor}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestCertificateRotation: replacing the files is enough — the next
// connection of the server and of the client uses the new certificates,
// and a new CA takes effect the same way.
func TestCertificateRotation(t *testing.T) {
	dir := t.TempDir()
	ca := testkit.NewCA(t, "switchboard test CA")
	s1, c1 := ca.IssueValid(t, "server-1"), ca.IssueValid(t, "client-1")
	srvTLS := newTLS(t, dir, ca, &s1, "srv-")
	addr := startTLS(t, peerSerial, srvTLS)
	cliTLS := newTLS(t, dir, ca, &c1, "cli-")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	sendOnNewConn := func() (string, error) {
		p := newPool(t, Options{TLS: cliTLS})
		p.Register("secure", addr)
		defer p.Close()
		out, err := p.Send(ctx, &router.Message{To: "f.secure.n:in"})
		return string(out), err
	}
	if got := serverSerial(t, addr, ca); got != s1.Serial.String() {
		t.Fatalf("server presents %s, want %s", got, s1.Serial)
	}
	if got, err := sendOnNewConn(); err != nil || got != c1.Serial.String() {
		t.Fatalf("client presents %s (%v), want %s", got, err, c1.Serial)
	}

	// Rotate both leaves.
	s2, c2 := ca.IssueValid(t, "server-2"), ca.IssueValid(t, "client-2")
	testkit.WriteFile(t, dir, "srv-cert.pem", s2.CertPEM)
	testkit.WriteFile(t, dir, "srv-key.pem", s2.KeyPEM)
	testkit.WriteFile(t, dir, "cli-cert.pem", c2.CertPEM)
	testkit.WriteFile(t, dir, "cli-key.pem", c2.KeyPEM)
	if got := serverSerial(t, addr, ca); got != s2.Serial.String() {
		t.Fatalf("after rotation the server presents %s, want %s", got, s2.Serial)
	}
	if got, err := sendOnNewConn(); err != nil || got != c2.Serial.String() {
		t.Fatalf("after rotation the client presents %s (%v), want %s", got, err, c2.Serial)
	}

	// Rotate the CA: new leaves from a new CA on both sides, the CA file
	// replaced on both sides.
	ca2 := testkit.NewCA(t, "next CA")
	s3, c3 := ca2.IssueValid(t, "server-3"), ca2.IssueValid(t, "client-3")
	for _, side := range []struct {
		prefix string
		leaf   testkit.Leaf
	}{{"srv-", s3}, {"cli-", c3}} {
		testkit.WriteFile(t, dir, side.prefix+"ca.pem", ca2.PEM)
		testkit.WriteFile(t, dir, side.prefix+"cert.pem", side.leaf.CertPEM)
		testkit.WriteFile(t, dir, side.prefix+"key.pem", side.leaf.KeyPEM)
	}
	if got, err := sendOnNewConn(); err != nil || got != c3.Serial.String() {
		t.Fatalf("after the CA rotation the client presents %s (%v), want %s", got, err, c3.Serial)
	}

	// A half-written rotation (a certificate without its key) keeps the
	// previous material in use instead of failing every handshake.
	testkit.WriteFile(t, dir, "cli-cert.pem", ca2.IssueValid(t, "client-4").CertPEM)
	if err := cliTLS.Reload(); err == nil {
		t.Fatal("Reload accepted a certificate that does not match its key")
	}
	if got, err := sendOnNewConn(); err != nil || got != c3.Serial.String() {
		t.Fatalf("during a half-written rotation the client presents %s (%v), want the previous %s", got, err, c3.Serial)
	}
}

func TestNewTLSErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := testkit.WriteFile(t, dir, "x.pem", []byte("not a certificate"))
	for _, tc := range []struct {
		f    grpcwire.TLSFiles
		want string
	}{
		{grpcwire.TLSFiles{}, "no tls_cert"},
		{grpcwire.TLSFiles{Cert: "a.pem"}, "together"},
		{grpcwire.TLSFiles{CA: dir + "/missing.pem"}, "missing.pem"},
		{grpcwire.TLSFiles{CA: notPEM}, "no PEM certificate"},
		{grpcwire.TLSFiles{Cert: notPEM, Key: notPEM}, "tls_cert"},
	} {
		if _, err := grpcwire.NewTLS(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewTLS(%+v) = %v; want an error mentioning %q", tc.f, err, tc.want)
		}
	}
}
