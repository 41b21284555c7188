package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi"
	"github.com/switchboard-io/switchboard/internal/testkit/apitest"
)

// serveHTTP runs an API server in this process over the catalog at dsn on
// 127.0.0.1:0 and returns its http:// DSN.
func serveHTTP(t testing.TB, dsn string) string {
	t.Helper()
	cat, err := switchboard.Open(context.Background(), dsn, switchboard.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	url, _ := apitest.Serve(t, cat, httpapi.Options{DSN: dsn})
	return url
}

// serveProc starts `switchboard serve` (its environment is the test's) and
// returns it with its URL.
func serveProc(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	p := start(t, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	line := p.line(t)
	_, rest, ok := strings.Cut(line, "listening on ")
	if !ok {
		t.Fatalf("serve printed %q; stderr %s", line, p.stderr)
	}
	url, _, _ := strings.Cut(rest, " ")
	return p, url
}

// TestServeCommand: serve on a SQLite file; the CLI registers, lists and
// deregisters through it; the demo's roles show up; SIGTERM stops it.
func TestServeCommand(t *testing.T) {
	dsn, _ := dsnIn(t)
	srv, url := serveProc(t, "--dsn", dsn, "--demo")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("url %q", url)
	}
	reg := start(t, "register", "--dsn", url, "--name", "via-server", "--type", "querier", "--address", "127.0.0.1:7001", "--id", "q-1")
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(reg.line(t)), &in); err != nil || in.ID != "q-1" {
		t.Fatalf("register through the server: %v %+v", err, in)
	}
	// The row is in the database itself, and the demo's roles come up.
	cat := openCatalog(t, dsn)
	waitFor(context.Background(), func() bool { _, err := cat.Get(context.Background(), "q-1"); return err == nil })
	code, stdout, stderr := cli(t, "ls", "--dsn", url, "--json", "--type", "querier")
	if code != 0 || !strings.Contains(stdout, `"q-1"`) {
		t.Fatalf("ls via server: %d %s %s", code, stdout, stderr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, _ := cat.List(context.Background(), switchboard.Query{Name: "demo-router"})
		if len(list) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve --demo registered no demo-router")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another client cannot deregister q-1: it lacks the secret.
	code, _, stderr = cli(t, "deregister", "--dsn", url, "q-1")
	if code != 1 || !strings.Contains(stderr, "secret") {
		t.Fatalf("foreign deregister: exit %d %q", code, stderr)
	}
	reg.cmd.Process.Signal(syscall.SIGTERM)
	if err := reg.wait(t); err != nil {
		t.Fatalf("register exit: %v %s", err, reg.stderr)
	}
	if _, err := cat.Get(context.Background(), "q-1"); err == nil {
		t.Fatal("q-1 still registered after its process stopped")
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, srv.stderr)
	}
}

func TestServeInvalidInput(t *testing.T) {
	dsn, _ := dsnIn(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--dsn", dsn, "--tls-cert", "/nonexistent.pem"}, "tls"},
		{[]string{"serve", "--dsn", dsn, "--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"}, "tls"},
		{[]string{"serve", "--dsn", "http://127.0.0.1:1"}, "dsn"},
		{[]string{"serve", "--dsn", "mysql://x"}, "dsn"},
		// An empty address would listen on a random port of every
		// interface; a port alone would fail only at listen, exit 1.
		{[]string{"serve", "--dsn", dsn, "--listen", ""}, "--listen: want host:port"},
		{[]string{"serve", "--dsn", dsn, "--listen", "7400"}, `--listen "7400"`},
	} {
		code, _, stderr := cli(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d stderr %q", tc.args, code, stderr)
		}
	}
}

// TestServeTLSAndToken: serve with a certificate generated here and a
// token; the CLI reaches it over https with SWITCHBOARD_HTTP_CA and
// SWITCHBOARD_HTTP_TOKEN, and is refused without the token.
func TestServeTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	dsn, _ := dsnIn(t)
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "s3cret-token")
	srv, url := serveProc(t, "--dsn", dsn, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("url %q", url)
	}
	// HTTP/2 is offered over TLS (browsers hold six HTTP/1.1 connections
	// per host, one per SSE stream).
	pemBytes, _ := os.ReadFile(certFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := hc.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("healthz over TLS: %d %s", resp.StatusCode, resp.Proto)
	}
	t.Setenv("SWITCHBOARD_HTTP_CA", certFile)
	code, stdout, stderr := cli(t, "ls", "--dsn", url, "--json")
	if code != 0 || stdout != "[]\n" {
		t.Fatalf("ls over https with token: %d %q %q", code, stdout, stderr)
	}
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "wrong")
	if code, _, stderr := cli(t, "ls", "--dsn", url); code != 1 || !strings.Contains(stderr, "wrong API token") {
		t.Fatalf("wrong token: %d %q", code, stderr)
	}
	os.Unsetenv("SWITCHBOARD_HTTP_TOKEN")
	if code, _, stderr := cli(t, "ls", "--dsn", url); code != 1 || !strings.Contains(stderr, "missing API token") {
		t.Fatalf("no token: %d %q", code, stderr)
	}
	os.Unsetenv("SWITCHBOARD_HTTP_CA")
	if code, _, stderr := cli(t, "ls", "--dsn", url); code != 1 || !strings.Contains(stderr, "certificate") {
		t.Fatalf("untrusted certificate: %d %q", code, stderr)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(t); err != nil {
		t.Fatalf("serve exit: %v %s", err, srv.stderr)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switchboard test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}
