package grpcwire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// TLSFiles names the PEM files of the wire's TLS ([transport] tls_cert,
// tls_key, tls_ca). All empty means plaintext.
type TLSFiles struct {
	// Cert and Key are this side's certificate (chain) and private key: the
	// server's certificate, or the client certificate a client presents.
	Cert, Key string
	// CA is the bundle of certificate authorities that sign the peers'
	// certificates. With it, a server requires and verifies client
	// certificates (mutual TLS) and a client verifies the server with it
	// instead of the system roots.
	CA string
}

// IsZero reports whether no file is set (plaintext).
func (f TLSFiles) IsZero() bool { return f == TLSFiles{} }

// TLS is the wire's TLS material, read from TLSFiles and re-read whenever
// one of the files changes (size or modification time), so
// certificates can be rotated by replacing the files without a restart:
// the next handshake uses the new ones. When a changed set does not load
// (a certificate written before its key), the previous material stays in
// use and the error is reported by Reload. It is safe for concurrent use.
type TLS struct {
	files TLSFiles

	mu    sync.Mutex
	stamp [3]fileStamp
	cur   *tlsMaterial
}

type tlsMaterial struct {
	cert *tls.Certificate // nil without Cert/Key
	pool *x509.CertPool   // nil without CA
}

type fileStamp struct {
	size  int64
	mtime time.Time
}

// NewTLS reads and checks the files: Cert and Key go together, and at
// least Cert/Key or CA must be set. Errors name the file and what is wrong
// with it.
func NewTLS(f TLSFiles) (*TLS, error) {
	switch {
	case f.IsZero():
		return nil, errors.New("tls: no tls_cert, tls_key or tls_ca set")
	case (f.Cert == "") != (f.Key == ""):
		return nil, fmt.Errorf("tls: tls_cert (%q) and tls_key (%q) must be set together", f.Cert, f.Key)
	}
	t := &TLS{files: f}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Files returns the files t reads.
func (t *TLS) Files() TLSFiles { return t.files }

// Reload re-reads the files if any changed since the last read. On error
// the previous material stays in use.
func (t *TLS) Reload() error {
	_, err := t.material()
	return err
}

// material returns the current material, re-reading the files first when
// they changed.
func (t *TLS) material() (*tlsMaterial, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var stamp [3]fileStamp
	for i, p := range []string{t.files.Cert, t.files.Key, t.files.CA} {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return t.keep(fmt.Errorf("tls: %w", err))
		}
		stamp[i] = fileStamp{size: st.Size(), mtime: st.ModTime()}
	}
	if t.cur != nil && stamp == t.stamp {
		return t.cur, nil
	}
	m := &tlsMaterial{}
	if t.files.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.files.Cert, t.files.Key)
		if err != nil {
			return t.keep(fmt.Errorf("tls: tls_cert %s / tls_key %s: %w", t.files.Cert, t.files.Key, err))
		}
		m.cert = &cert
	}
	if t.files.CA != "" {
		b, err := os.ReadFile(t.files.CA)
		if err != nil {
			return t.keep(fmt.Errorf("tls: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return t.keep(fmt.Errorf("tls: tls_ca %s holds no PEM certificate", t.files.CA))
		}
		m.pool = pool
	}
	t.cur, t.stamp = m, stamp
	return m, nil
}

// keep returns the current material with err, or only err when there is
// none yet. t.mu is held.
func (t *TLS) keep(err error) (*tlsMaterial, error) {
	if t.cur == nil {
		return nil, err
	}
	return t.cur, err
}

// current is material for a handshake: a reload error is ignored while
// older material exists (a rotation half-written), and fails the handshake
// otherwise.
func (t *TLS) current() (*tlsMaterial, error) {
	m, err := t.material()
	if m != nil {
		return m, nil
	}
	return nil, err
}

// ServerCredentials returns the credentials of a server: its certificate
// from Cert/Key (required), and with CA, client certificates required and
// verified against it (mutual TLS). TLS 1.2 at least, ALPN h2.
func (t *TLS) ServerCredentials() (credentials.TransportCredentials, error) {
	if t.files.Cert == "" {
		return nil, errors.New("tls: a server needs tls_cert and tls_key")
	}
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := t.current()
			if err != nil {
				return nil, err
			}
			cfg := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				NextProtos:   []string{"h2"},
			}
			if m.pool != nil {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
				cfg.ClientCAs = m.pool
			}
			return cfg, nil
		},
	}), nil
}

// ClientCredentials returns the credentials of a client: the server's
// certificate is verified against CA (the system roots without one) for the
// host of the address dialled — its DNS name, or its IP address, which the
// certificate must list (crypto/tls alone checks no name for an IP) — and
// Cert/Key, when set, are presented as the client certificate. The CA is
// read at every handshake (after a change), which is why verification is
// done here rather than by crypto/tls's static RootCAs.
func (t *TLS) ClientCredentials() credentials.TransportCredentials {
	return &clientCreds{TransportCredentials: credentials.NewTLS(t.clientConfig("")), t: t}
}

// clientCreds makes a tls.Config for every handshake, so verification
// knows the host dialled: the ServerName of a client connection's
// tls.ConnectionState is empty for an IP address.
type clientCreds struct {
	credentials.TransportCredentials // Info, ServerHandshake
	t                                *TLS
	serverName                       string // OverrideServerName
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	name := c.serverName
	if name == "" {
		name = authority
		if h, _, err := net.SplitHostPort(authority); err == nil {
			name = h
		}
	}
	if name == "" {
		return nil, nil, fmt.Errorf("tls: no server name to verify the certificate of %q against", authority)
	}
	return credentials.NewTLS(c.t.clientConfig(name)).ClientHandshake(ctx, authority, raw)
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	return &clientCreds{TransportCredentials: c.TransportCredentials.Clone(), t: c.t, serverName: c.serverName}
}

// OverrideServerName sets the name the server's certificate is verified
// for (deprecated in grpc-go; grpc.WithAuthority does the same).
func (c *clientCreds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}

// clientConfig is the client configuration of one handshake with the
// server named name (a DNS name or an IP address, an IPv6 zone ignored).
func (t *TLS) clientConfig(name string) *tls.Config {
	verifyName := name
	if i := strings.LastIndexByte(verifyName, '%'); i > 0 && strings.Contains(verifyName, ":") {
		verifyName = verifyName[:i] // fe80::1%eth0: the certificate lists fe80::1
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: name,
		// Verification is done in VerifyConnection, against the current CA.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			m, err := t.current()
			if err != nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server presented no certificate")
			}
			// Never cs.ServerName: it is empty when name is an IP address,
			// and an empty DNSName verifies no name at all.
			opts := x509.VerifyOptions{DNSName: verifyName, Roots: m.pool, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(opts)
			return err
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m, err := t.current()
			if err != nil {
				return nil, err
			}
			if m.cert == nil {
				return &tls.Certificate{}, nil // none configured: send none
			}
			return m.cert, nil
		},
	}
}

// CodeTLS is the code of a send that failed because the two sides could not
// agree on transport security: a TLS client against a plaintext server (or
// the reverse), a certificate from an unknown authority, an expired or
// rejected certificate. Not retryable: the next attempt fails the same way
// until the configuration or the certificates change.
const CodeTLS = "tls_failed"

// HandshakeWatch records why the connections made through one set of
// credentials failed their security handshake, so a caller can tell a TLS
// failure (permanent) from a peer that is down (retryable): grpc-go reports
// both as Unavailable.
type HandshakeWatch struct {
	mu      sync.Mutex
	err     error
	strikes int // consecutive plaintext connections closed before a byte
}

// PlaintextStrikes is how many connections in a row a peer must close
// before sending a byte for a plaintext client to call it a TLS server:
// one such connection may also be a server stopping while it accepted.
const PlaintextStrikes = 2

// Err returns the last security failure of a connection that has not since
// received a byte from its peer, or nil. It is final (permanent) for a TLS
// failure, and for a plaintext client once PlaintextStrikes connections in
// a row were closed before a byte; before that it is a hint to add to the
// retryable error.
func (w *HandshakeWatch) Err() (err error, final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err, w.err != nil && (w.strikes == 0 || w.strikes >= PlaintextStrikes)
}

// set records a TLS failure (final at once), or clears the record.
func (w *HandshakeWatch) set(err error) {
	w.mu.Lock()
	w.err, w.strikes = err, 0
	w.mu.Unlock()
}

// strike records a plaintext connection closed before a byte.
func (w *HandshakeWatch) strike(err error) {
	w.mu.Lock()
	w.err = err
	w.strikes++
	w.mu.Unlock()
}

// WatchHandshakes wraps client credentials c (TLS or plaintext) so that
// handshake failures are recorded in the returned watch: a failed TLS
// handshake; a TLS alert the server sends right after it (TLS 1.3 servers
// reject a client certificate that way); and a connection the server closes
// before sending a single byte (a plaintext client at a TLS server, whose
// handshake fails on the server side only; final after PlaintextStrikes
// connections in a row). The first byte read from a
// peer clears the record. A connection that fails after it has received
// bytes records nothing: that is a peer going away, not a security failure.
func WatchHandshakes(c credentials.TransportCredentials) (credentials.TransportCredentials, *HandshakeWatch) {
	w := &HandshakeWatch{}
	return &watchedCreds{TransportCredentials: c, w: w}, w
}

type watchedCreds struct {
	credentials.TransportCredentials
	w *HandshakeWatch
}

func (c *watchedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	secure := c.Info().SecurityProtocol == "tls"
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		if ctx.Err() == nil && !isRefusedOrReset(err) {
			hint := "is the server serving TLS, and is its certificate signed by tls_ca and current?"
			if errors.As(err, new(x509.HostnameError)) {
				hint = "the server's certificate is not issued for the host dialled: it must list that DNS name or IP address, the one the module is registered at"
			}
			c.w.set(fmt.Errorf("TLS handshake with %s failed: %w (%s)", authority, err, hint))
		}
		return nil, nil, err
	}
	return &watchedConn{Conn: conn, w: c.w, authority: authority, secure: secure}, info, nil
}

func (c *watchedCreds) Clone() credentials.TransportCredentials {
	return &watchedCreds{TransportCredentials: c.TransportCredentials.Clone(), w: c.w}
}

// watchedConn clears or sets its watch on the first read.
type watchedConn struct {
	net.Conn
	w         *HandshakeWatch
	authority string
	secure    bool
	decided   atomic.Bool // the first read has told us something
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.decided.Load() {
		if n > 0 {
			c.decided.Store(true)
			c.w.set(nil)
		} else if err != nil {
			c.failed(err)
		}
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && !c.decided.Load() {
		c.failed(err)
	}
	return n, err
}

// failed records a read or write failure before the peer sent its first
// byte: the peer dropped the connection as soon as it saw ours, which a
// server does when the security does not match (a TLS 1.3 server rejects a
// client certificate after the client's side of the handshake is done).
func (c *watchedConn) failed(err error) {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
		return // our own close or deadline: nothing learnt
	}
	c.decided.Store(true)
	if c.secure {
		c.w.set(fmt.Errorf("the server at %s ended the connection right after the TLS handshake (%v): it rejected this client's certificate, or got none (is tls_cert signed by the server's tls_ca, and current?)", c.authority, err))
		return
	}
	c.w.strike(fmt.Errorf("the server at %s ended the connection before sending a byte (%v): does it require TLS? Set tls_ca (and tls_cert/tls_key for mutual TLS)", c.authority, err))
}

// isRefusedOrReset reports errors of a peer that is not there or went away
// (retryable), as opposed to one that does not speak our security.
func isRefusedOrReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
