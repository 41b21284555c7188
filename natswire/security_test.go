package natswire

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/router"
)

// startServer starts a nats-server with opts (loopback, a free port, no
// logging, no signal handlers) and stops it when the test ends.
func startServer(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host = "127.0.0.1"
	if opts.Port == 0 {
		opts.Port = -1
	}
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// writeFile writes b to name in dir and returns its path.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// echoOver checks that a module served over a connection made with opts
// answers a request sent over another such connection.
func echoOver(t *testing.T, url string, opts ConnectOptions) {
	t.Helper()
	opts.Logger = testLogger()
	dial := func() *Wire {
		nc, err := Connect(url, opts)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(nc.Close)
		return newWire(t, nc, Options{})
	}
	listen(t, dial(), "secured", router.Echo)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	out, err := dial().Send(ctx, &router.Message{To: "f.secured.n:in", Payload: []byte("ping")})
	if err != nil || string(out) != "ping" {
		t.Fatalf("send: out=%q err=%v", out, err)
	}
}

// refused checks that Connect fails with an authorization error that says
// the credentials were refused, names what was presented, and shows none
// of secrets.
func refused(t *testing.T, url string, opts ConnectOptions, names string, secrets ...string) {
	t.Helper()
	opts.Logger = testLogger()
	nc, err := Connect(url, opts)
	if err == nil {
		nc.Close()
		t.Fatal("connected with wrong credentials")
	}
	msg := err.Error()
	if !strings.Contains(msg, "refused the credentials") || !strings.Contains(msg, names) {
		t.Fatalf("error %q does not say that %s was refused", msg, names)
	}
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Fatalf("error %q shows a secret", msg)
		}
	}
}

func userSeedFile(t *testing.T, dir, name string) (path, pub string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ = kp.PublicKey()
	return writeFile(t, dir, name, append(seed, '\n')), pub
}

// TestAccountsServer: a server with accounts configured in its options
// admits an nkey user and a user with a password, and refuses wrong
// ones with an error naming what was presented and showing no secret.
func TestAccountsServer(t *testing.T) {
	dir := t.TempDir()
	seed, pub := userSeedFile(t, dir, "user.nk")
	otherSeed, _ := userSeedFile(t, dir, "other.nk")
	acct := server.NewAccount("APP")
	s := startServer(t, &server.Options{
		Accounts: []*server.Account{acct},
		Nkeys:    []*server.NkeyUser{{Nkey: pub, Account: acct}},
		Users:    []*server.User{{Username: "alice", Password: "s3cret-pw", Account: acct}},
	})
	url := s.ClientURL()
	t.Run("nkey", func(t *testing.T) { echoOver(t, url, ConnectOptions{NkeySeedFile: seed}) })
	t.Run("user and password", func(t *testing.T) { echoOver(t, url, ConnectOptions{User: "alice", Password: "s3cret-pw"}) })
	t.Run("unknown nkey", func(t *testing.T) {
		refused(t, url, ConnectOptions{NkeySeedFile: otherSeed}, "nkey seed file "+otherSeed)
	})
	t.Run("wrong password", func(t *testing.T) {
		refused(t, url, ConnectOptions{User: "alice", Password: "wrong-pw"}, `user "alice"`, "wrong-pw")
	})
	t.Run("password in the URL", func(t *testing.T) {
		bad := strings.Replace(url, "nats://", "nats://alice:url-pw@", 1)
		refused(t, bad, ConnectOptions{}, "the credentials in the URL", "url-pw")
	})
	t.Run("none", func(t *testing.T) { refused(t, url, ConnectOptions{}, "none were given") })
}

// TestTokenServer: a server with a token admits it and refuses another.
func TestTokenServer(t *testing.T) {
	s := startServer(t, &server.Options{Authorization: "tok-right"})
	echoOver(t, s.ClientURL(), ConnectOptions{Token: "tok-right"})
	refused(t, s.ClientURL(), ConnectOptions{Token: "tok-wrong"}, "a token", "tok-wrong")
}

// operator is an operator-mode trust chain made in the test: the operator,
// a system account and an application account whose users connect with
// .creds files.
type operator struct {
	claims   *jwt.OperatorClaims
	resolver *server.MemAccResolver
	sys      string
	account  nkeys.KeyPair
}

func newOperator(t *testing.T) *operator {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{claims: oc, resolver: &server.MemAccResolver{}}
	for i := range 2 {
		akp, _ := nkeys.CreateAccount()
		apub, _ := akp.PublicKey()
		ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		if err := op.resolver.Store(apub, ajwt); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			op.sys = apub
		} else {
			op.account = akp
		}
	}
	return op
}

// creds writes a .creds file of a new user of account, signed by signer.
func creds(t *testing.T, dir, name string, account, signer nkeys.KeyPair) string {
	t.Helper()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	if account != signer {
		uc.IssuerAccount, _ = account.PublicKey()
	}
	ujwt, err := uc.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, b)
}

// TestOperatorServer: an operator-mode server (accounts as JWTs, the way
// Synadia Cloud and nsc-managed clusters run) admits a user's .creds file
// and refuses one signed by an account it does not know.
func TestOperatorServer(t *testing.T) {
	op := newOperator(t)
	s := startServer(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{op.claims}, AccountResolver: op.resolver, SystemAccount: op.sys})
	dir := t.TempDir()
	good := creds(t, dir, "good.creds", op.account, op.account)
	stranger, _ := nkeys.CreateAccount()
	bad := creds(t, dir, "stranger.creds", stranger, stranger)
	t.Run("creds", func(t *testing.T) { echoOver(t, s.ClientURL(), ConnectOptions{CredsFile: good}) })
	t.Run("unknown account", func(t *testing.T) { refused(t, s.ClientURL(), ConnectOptions{CredsFile: bad}, "creds file "+bad) })
	t.Run("user and password", func(t *testing.T) {
		refused(t, s.ClientURL(), ConnectOptions{User: "alice", Password: "pw-x"}, `user "alice"`, "pw-x")
	})
}

// testPKI is a CA made in the test, with a server certificate for
// 127.0.0.1 and a client certificate, all written as PEM files.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	otherCA                                          string // a CA that signed neither
	pool                                             *x509.CertPool
}

func newPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	cert := func(tmpl *x509.Certificate, pub *ecdsa.PublicKey, parent *x509.Certificate, signer *ecdsa.PrivateKey) *x509.Certificate {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	certPEM := func(c *x509.Certificate) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	keyPEM := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	caTmpl := func(cn string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	}
	caKey := key()
	ca := cert(caTmpl("switchboard test CA"), &caKey.PublicKey, nil, caKey)
	otherKey := key()
	other := cert(caTmpl("another CA"), &otherKey.PublicKey, nil, otherKey)
	srvKey, cliKey := key(), key()
	srv := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "nats"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, &srvKey.PublicKey, ca, caKey)
	cli := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "module"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, &cliKey.PublicKey, ca, caKey)
	p := &testPKI{
		ca:         writeFile(t, dir, "ca.pem", certPEM(ca)),
		otherCA:    writeFile(t, dir, "other-ca.pem", certPEM(other)),
		serverCert: writeFile(t, dir, "server.pem", certPEM(srv)),
		serverKey:  writeFile(t, dir, "server-key.pem", keyPEM(srvKey)),
		clientCert: writeFile(t, dir, "client.pem", certPEM(cli)),
		clientKey:  writeFile(t, dir, "client-key.pem", keyPEM(cliKey)),
		pool:       x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	return p
}

// serverTLS is the TLS configuration of a server with the PKI's
// certificate; verify makes it require a client certificate of the CA.
func (p *testPKI) serverTLS(t *testing.T, verify bool) *tls.Config {
	t.Helper()
	c, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{c}, MinVersion: tls.VersionTLS12}
	if verify {
		cfg.ClientCAs, cfg.ClientAuth = p.pool, tls.RequireAndVerifyClientCert
	}
	return cfg
}

// TestTLS: TLS servers with a private CA — the server's certificate
// checked against the CA file, a client certificate where the server
// requires one, and handshake-first — and clear failures without them.
func TestTLS(t *testing.T) {
	p := newPKI(t)
	tlsURL := func(s *server.Server) string { return strings.Replace(s.ClientURL(), "nats://", "tls://", 1) }

	plain := startServer(t, &server.Options{TLS: true, TLSConfig: p.serverTLS(t, false)})
	t.Run("private CA", func(t *testing.T) { echoOver(t, tlsURL(plain), ConnectOptions{TLSCA: p.ca}) })
	t.Run("nats URL with a CA file", func(t *testing.T) { echoOver(t, plain.ClientURL(), ConnectOptions{TLSCA: p.ca}) })
	t.Run("another CA", func(t *testing.T) {
		_, err := Connect(tlsURL(plain), ConnectOptions{TLSCA: p.otherCA, Logger: testLogger()})
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("err = %v, want the certificate refused", err)
		}
	})

	mutual := startServer(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: p.serverTLS(t, true)})
	t.Run("client certificate", func(t *testing.T) {
		echoOver(t, tlsURL(mutual), ConnectOptions{TLSCA: p.ca, TLSCert: p.clientCert, TLSKey: p.clientKey})
	})
	t.Run("no client certificate", func(t *testing.T) {
		if nc, err := Connect(tlsURL(mutual), ConnectOptions{TLSCA: p.ca, Logger: testLogger()}); err == nil {
			nc.Close()
			t.Fatal("connected without the client certificate the server requires")
		}
	})

	first := startServer(t, &server.Options{TLS: true, TLSHandshakeFirst: true, TLSConfig: p.serverTLS(t, false)})
	t.Run("handshake first", func(t *testing.T) {
		echoOver(t, tlsURL(first), ConnectOptions{TLSCA: p.ca, TLSHandshakeFirst: true})
	})
	t.Run("handshake first not set", func(t *testing.T) {
		if nc, err := Connect(tlsURL(first), ConnectOptions{TLSCA: p.ca, Timeout: time.Second, Logger: testLogger()}); err == nil {
			nc.Close()
			t.Fatal("connected to a handshake-first server without handshake first")
		}
	})
}

// TestConnectOptionsValidate: each wrong option is refused before any
// connection, by a *switchboard.FieldError naming the option and the file,
// and no error shows a secret.
func TestConnectOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	p := newPKI(t)
	op := newOperator(t)
	good := creds(t, dir, "good.creds", op.account, op.account)
	seed, _ := userSeedFile(t, dir, "user.nk")
	akp, _ := nkeys.CreateAccount()
	aseed, _ := akp.Seed()
	accountSeed := writeFile(t, dir, "account.nk", aseed)
	goodBytes, _ := os.ReadFile(good)
	seedBytes, _ := os.ReadFile(seed)
	// A creds file whose JWT is one user's and whose seed is another's.
	jwtPart, _ := nkeys.ParseDecoratedJWT(goodBytes)
	goodKP, _ := nkeys.ParseDecoratedNKey(goodBytes)
	goodSeed, _ := goodKP.Seed()
	mixed := strings.Replace(string(goodBytes), string(goodSeed), strings.TrimSpace(string(seedBytes)), 1)
	if mixed == string(goodBytes) {
		t.Fatal("the creds file's seed was not replaced")
	}
	mismatched := writeFile(t, dir, "mixed.creds", []byte(mixed))
	missing := filepath.Join(dir, "absent.creds")
	empty := writeFile(t, dir, "empty", nil)
	garbage := writeFile(t, dir, "garbage", []byte("not a key\n"))

	for _, tc := range []struct {
		name  string
		opts  ConnectOptions
		field string
		says  string
	}{
		{"creds missing", ConnectOptions{CredsFile: missing}, fieldCreds, missing},
		{"creds empty", ConnectOptions{CredsFile: empty}, fieldCreds, "is empty"},
		{"creds garbage", ConnectOptions{CredsFile: garbage}, fieldCreds, "no user JWT"},
		{"creds of two users", ConnectOptions{CredsFile: mismatched}, fieldCreds, "its JWT is for user"},
		{"creds without a seed", ConnectOptions{CredsFile: writeFile(t, dir, "jwt-only", []byte(jwtPart))}, fieldCreds, "no user nkey seed"},
		{"nkey missing", ConnectOptions{NkeySeedFile: missing}, fieldNkey, "cannot read it"},
		{"nkey of an account", ConnectOptions{NkeySeedFile: accountSeed}, fieldNkey, "no user nkey seed"},
		{"nkey garbage", ConnectOptions{NkeySeedFile: garbage}, fieldNkey, garbage},
		{"two kinds", ConnectOptions{CredsFile: good, User: "u", Password: "pw-two"}, "nats credentials", "give one kind"},
		{"token and user", ConnectOptions{Token: "tok-two", User: "u"}, "nats credentials", "give one kind"},
		{"password alone", ConnectOptions{Password: "pw-alone"}, fieldPassword, "without a user"},
		{"token with a newline", ConnectOptions{Token: "tok-nl\n"}, fieldToken, "white space"},
		{"CA missing", ConnectOptions{TLSCA: missing}, fieldTLSCA, missing},
		{"CA not PEM", ConnectOptions{TLSCA: garbage}, fieldTLSCA, "no PEM certificate"},
		{"cert without key", ConnectOptions{TLSCert: p.clientCert}, fieldTLSCert, "nats.tls_key is not set"},
		{"key without cert", ConnectOptions{TLSKey: p.clientKey}, fieldTLSKey, "nats.tls_cert is not set"},
		{"key of another cert", ConnectOptions{TLSCert: p.clientCert, TLSKey: p.serverKey}, fieldTLSKey, p.serverKey},
		{"cert not PEM", ConnectOptions{TLSCert: garbage, TLSKey: p.clientKey}, fieldTLSCert, garbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			var fe *switchboard.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want a FieldError on %s saying %q", err, tc.field, tc.says)
			}
			if _, cerr := Connect("nats://127.0.0.1:1", tc.opts); cerr == nil || cerr.Error() != err.Error() {
				t.Fatalf("Connect: %v, want the validation error before connecting", cerr)
			}
			for _, s := range []string{"pw-", "tok-", string(seedBytes[:10]), string(aseed[:10])} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
		})
	}
	for _, ok := range []ConnectOptions{{}, {CredsFile: good}, {NkeySeedFile: seed}, {User: "u"}, {User: "u", Password: "p"}, {Token: "t"},
		{TLSCA: p.ca}, {TLSCert: p.clientCert, TLSKey: p.clientKey}, {TLSHandshakeFirst: true}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// TestReplicasOption: the stream replica count is checked by New.
func TestReplicasOption(t *testing.T) {
	nc := connect(t, startBroker(t, t.TempDir(), -1).ClientURL())
	for _, n := range []int{-1, 6} {
		if _, err := New(nc, Options{Mode: JetStream, Replicas: n}); err == nil || !strings.Contains(err.Error(), "stream_replicas") {
			t.Errorf("Replicas %d: err = %v", n, err)
		}
	}
	w := newWire(t, nc, Options{Mode: JetStream})
	if w.opts.Replicas != 1 {
		t.Errorf("default replicas %d, want 1", w.opts.Replicas)
	}
}
