package remote

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestRefusedAndResetAreOpErrors: a connection the server refuses, or
// resets while the client waits for its answer, fails the client's
// request, over HTTP/1.1 and over HTTP/2, with the errno inside a
// *net.OpError. unreachable's *net.OpError clause is what classifies them
// (ErrUnreachable): a clause for the errno alone would never be reached.
func TestRefusedAndResetAreOpErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		errno syscall.Errno
		start func(t *testing.T) (base string, cfg Config)
	}{
		{"HTTP/1.1 refused", syscall.ECONNREFUSED, func(t *testing.T) (string, Config) { return "http://" + closedAddr(t), Config{} }},
		{"HTTP/2 refused", syscall.ECONNREFUSED, func(t *testing.T) (string, Config) {
			_, _, cfg := h2Listener(t) // the dial fails before TLS and ALPN
			return "https://" + closedAddr(t), cfg
		}},
		{"HTTP/1.1 reset", syscall.ECONNRESET, startResetHTTP1},
		{"HTTP/2 reset", syscall.ECONNRESET, startResetHTTP2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, cfg := tc.start(t)
			cfg.Logger = slog.New(slog.DiscardHandler)
			c, err := Open(t.Context(), base, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Get(t.Context(), "x")
			var op *net.OpError
			if !errors.Is(err, tc.errno) || !errors.As(err, &op) || !errors.Is(err, switchboard.ErrUnreachable) || !unreachable(err) {
				t.Fatalf("Get: %v (%v: %v, *net.OpError: %v, unreachable: %v)", err, tc.errno,
					errors.Is(err, tc.errno), errors.As(err, &op), errors.Is(err, switchboard.ErrUnreachable))
			}
		})
	}
}

// closedAddr is an address of 127.0.0.1 where nothing listens.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// resetAfter serves ln: on each connection it reads until done says the
// request is in, then resets the connection (RST, not FIN), so the client
// reads ECONNRESET while it waits for the answer. wrap, when not nil,
// turns the TCP connection into the one the request is read from (TLS).
func resetAfter(t *testing.T, ln net.Listener, wrap func(net.Conn) (net.Conn, error), done func(*bufio.Reader) error) {
	testkit.Serve(ln, func(conn net.Conn) {
		rd := conn
		if wrap != nil {
			var err error
			if rd, err = wrap(conn); err != nil {
				t.Errorf("server side: %v", err)
				return
			}
		}
		if err := done(bufio.NewReader(rd)); err != nil {
			t.Errorf("server side: reading the request: %v", err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
	})
	t.Cleanup(func() { ln.Close() })
}

// startResetHTTP1 is a plain HTTP/1.1 server that resets each connection
// once it has read the request's header.
func startResetHTTP1(t *testing.T) (string, Config) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resetAfter(t, ln, nil, func(r *bufio.Reader) error {
		_, err := http.ReadRequest(r)
		return err
	})
	return "http://" + ln.Addr().String(), Config{}
}

// h2Listener is a listener, the TLS configuration of a server on it that
// negotiates only h2, and the client Config that trusts that server.
func h2Listener(t *testing.T) (net.Listener, *tls.Config, Config) {
	srv := httptest.NewUnstartedServer(nil)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	cert, tlsCfg := srv.Certificate(), srv.TLS.Clone()
	srv.Close()
	tlsCfg.NextProtos = []string{"h2"}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, tlsCfg, Config{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
}

// startResetHTTP2 is an HTTP/2 server (TLS, h2 negotiated) that resets
// each connection once it has read the client's HEADERS frame that ends
// the request.
func startResetHTTP2(t *testing.T) (string, Config) {
	ln, serverCfg, cfg := h2Listener(t)
	wrap := func(conn net.Conn) (net.Conn, error) {
		tc := tls.Server(conn, serverCfg)
		if err := tc.HandshakeContext(t.Context()); err != nil {
			return nil, err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			return nil, errors.New("negotiated " + p + ", not h2: the client does not speak HTTP/2")
		}
		return tc, nil
	}
	resetAfter(t, ln, wrap, func(r *bufio.Reader) error {
		preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		if _, err := io.ReadFull(r, preface); err != nil {
			return err
		}
		if !bytes.HasPrefix(preface, []byte("PRI * HTTP/2.0")) {
			return errors.New("no HTTP/2 preface: " + strings.TrimSpace(string(preface)))
		}
		for {
			// A frame: 3 bytes length, type, flags, 4 bytes stream id.
			var hdr [9]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return err
			}
			n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
			if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
				return err
			}
			const headers, endStream = 0x1, 0x1
			if hdr[3] == headers && hdr[4]&endStream != 0 {
				return nil
			}
		}
	})
	return "https://" + ln.Addr().String(), cfg
}
