package checks_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/checks"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

func probe(t *testing.T, target, body string) checks.Result {
	t.Helper()
	c := switchboard.Check{Target: target, Body: body, Timeout: 5 * time.Second}
	return checks.NewProber(checks.ProberOptions{}).Probe(context.Background(), c)
}

func wantResult(t *testing.T, got checks.Result, status switchboard.Status, output ...string) {
	t.Helper()
	t.Logf("%s: %s", got.Status, got.Output)
	if got.Status != status {
		t.Errorf("status %q (output %q), want %q", got.Status, got.Output, status)
	}
	for _, o := range output {
		if !strings.Contains(got.Output, o) {
			t.Errorf("output %q, want it to hold %q", got.Output, o)
		}
	}
}

// TestProbeHTTP: 2xx passes, 429 is a warning, any other status fails,
// the expected body must be in the first 4 KiB, and a probe that takes
// longer than the timeout fails.
func TestProbeHTTP(t *testing.T) {
	var userAgent atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		userAgent.Store(r.UserAgent())
		w.Write([]byte("status: ready"))
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/created", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux.HandleFunc("/late-body", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", checks.MaxBody) + "ready"))
	})
	hang := make(chan struct{})
	defer close(hang)
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	wantResult(t, probe(t, srv.URL+"/ok", ""), switchboard.StatusPassing, "200 OK")
	if ua := userAgent.Load(); ua != checks.UserAgent {
		t.Errorf("User-Agent %q, want %q", ua, checks.UserAgent)
	}
	wantResult(t, probe(t, srv.URL+"/ok", "ready"), switchboard.StatusPassing, "200")
	wantResult(t, probe(t, srv.URL+"/ok", "absent"), switchboard.StatusCritical, "200", `"absent"`)
	wantResult(t, probe(t, srv.URL+"/late-body", "ready"), switchboard.StatusCritical, "4096 bytes")
	wantResult(t, probe(t, srv.URL+"/created", ""), switchboard.StatusPassing, "201")
	wantResult(t, probe(t, srv.URL+"/busy", ""), switchboard.StatusWarning, "429")
	wantResult(t, probe(t, srv.URL+"/down", ""), switchboard.StatusCritical, "503")
	wantResult(t, probe(t, srv.URL+"/missing", ""), switchboard.StatusCritical, "404")

	c := switchboard.Check{Target: srv.URL + "/hang", Timeout: 100 * time.Millisecond}
	wantResult(t, checks.NewProber(checks.ProberOptions{}).Probe(context.Background(), c), switchboard.StatusCritical, "timed out after 100ms")
}

// TestProbeHTTPS: an https check verifies the server's certificate: it
// passes with the server's authority among the prober's roots, and fails
// without it.
func TestProbeHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	wantResult(t, probe(t, srv.URL+"/", ""), switchboard.StatusCritical, "certificate")
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := switchboard.Check{Target: srv.URL + "/", Timeout: 5 * time.Second}
	wantResult(t, checks.NewProber(checks.ProberOptions{RootCAs: roots}).Probe(context.Background(), c), switchboard.StatusPassing, "200")
}

// TestProbeRedirects: a redirect to the same host is followed; one to
// another host is not (the other host gets no request).
func TestProbeRedirects(t *testing.T) {
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	// The other server by another name of the same machine: localhost
	// rather than 127.0.0.1.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, otherURL+"/", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	wantResult(t, probe(t, srv.URL+"/here", ""), switchboard.StatusPassing, "200")
	wantResult(t, probe(t, srv.URL+"/away", ""), switchboard.StatusCritical, "another host")
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other host got %d requests, want none", n)
	}
	wantResult(t, probe(t, srv.URL+"/loop", ""), switchboard.StatusCritical, "redirects")
}

// TestProbeBodyCap: a probe reads at most MaxBody bytes of an endless
// body and returns.
func TestProbeBodyCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 1024))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	wantResult(t, probe(t, srv.URL+"/", "z"), switchboard.StatusCritical, "do not hold")
}

// TestProbeTCP: a listening port passes, a closed one fails.
func TestProbeTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(ln, func(net.Conn) {})
	addr := ln.Addr().String()
	wantResult(t, probe(t, "tcp://"+addr, ""), switchboard.StatusPassing, "success")
	ln.Close()
	wantResult(t, probe(t, "tcp://"+addr, ""), switchboard.StatusCritical, "refused")
}

// TestProbeGRPC: grpc.health.v1 answers SERVING (the whole server, or a
// named service) passes; NOT_SERVING, an unknown service or no server
// fails.
func TestProbeGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus("shop.Cart", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("shop.Orders", healthpb.HealthCheckResponse_NOT_SERVING)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	addr := ln.Addr().String()

	wantResult(t, probe(t, "grpc://"+addr, ""), switchboard.StatusPassing, "SERVING")
	wantResult(t, probe(t, "grpc://"+addr+"/shop.Cart", ""), switchboard.StatusPassing, "SERVING")
	wantResult(t, probe(t, "grpc://"+addr+"/shop.Orders", ""), switchboard.StatusCritical, "NOT_SERVING")
	wantResult(t, probe(t, "grpc://"+addr+"/shop.None", ""), switchboard.StatusCritical, "NotFound")
	gs.Stop()
	wantResult(t, probe(t, "grpc://"+addr, ""), switchboard.StatusCritical, "Unavailable")
}

// TestProbeClosesWithReset: a probe's connection, TCP and HTTP alike,
// closes with a reset, leaving no TIME_WAIT socket behind: the target
// reads ECONNRESET after the probe, not the end of a closed stream.
func TestProbeClosesWithReset(t *testing.T) {
	ends := make(chan error, 2)
	addr := testkit.ServeLoopback(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		if strings.HasPrefix(string(buf[:n]), "GET ") {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			_, err = io.Copy(io.Discard, c)
		}
		ends <- err
	})
	for _, target := range []string{"tcp://" + addr, "http://" + addr + "/"} {
		wantResult(t, probe(t, target, ""), switchboard.StatusPassing)
		if err := <-ends; !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: the target read %v after the probe, want a reset", target, err)
		}
	}
}

// TestProbeHeaderCap: a target that sends headers without end fails the
// probe once 64 KiB of them were read; the probe does not hold them all.
func TestProbeHeaderCap(t *testing.T) {
	addr := testkit.ServeLoopback(t, func(c net.Conn) {
		// The request is read first: a connection closed with unread data
		// is reset, which the probe would see first.
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("x", 1000) + "\r\n"
		for {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	wantResult(t, probe(t, "http://"+addr+"/", ""), switchboard.StatusCritical, "response headers over 65536 bytes")
}
