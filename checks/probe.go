package checks

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/switchboard-io/switchboard"
)

// MaxBody is how much of an HTTP check's response body a probe reads
// (bytes): Check.Body is looked for in it, and the rest is not read.
const MaxBody = 4096

// maxRedirects bounds the redirects an HTTP probe follows (to the same host
// only).
const maxRedirects = 3

// UserAgent is the User-Agent of HTTP probes.
const UserAgent = "Switchboard Health Check"

// Result is the outcome of one probe.
type Result struct {
	// Status is StatusPassing, StatusWarning (HTTP 429) or StatusCritical.
	Status switchboard.Status
	// Output is a short line: the status code or the error.
	Output string
}

// Prober probes check targets. Its zero value is not usable; use
// NewProber. It is safe for concurrent use.
type Prober struct {
	client *http.Client
	dialer net.Dialer
}

// ProberOptions tunes a Prober.
type ProberOptions struct {
	// RootCAs verifies the certificates of https targets (nil: the
	// system's roots).
	RootCAs *x509.CertPool
}

// NewProber returns a prober. HTTP probes use no proxy and no keep-alive
// (each probe opens its own connection, as a new client would), verify
// TLS certificates, and follow at most three redirects, only to the same
// host. Every probe's connection closes with a reset (dial).
func NewProber(o ProberOptions) *Prober {
	// No TCP keep-alive: a probe's connection lives for one exchange,
	// and setting it up costs every probe three system calls.
	p := &Prober{dialer: net.Dialer{KeepAlive: -1}}
	tr := &oneShot{dial: p.dial, tls: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs}}
	p.client = &http.Client{Transport: tr, CheckRedirect: redirectSameHost}
	return p
}

// dial connects as the dialer does, and sets the connection to close with
// a reset (SO_LINGER 0), as kubelet's probes do: a probe's connection
// then leaves no TIME_WAIT socket on the prober's host (at 1,000 probes a
// second, 60,000 of them, each holding a port toward its target) and
// spares both ends the closing handshake.
func (p *Prober) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := p.dialer.DialContext(ctx, network, addr)
	if tc, ok := conn.(*net.TCPConn); ok {
		if err := tc.SetLinger(0); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, err
}

// errOtherHost refuses a redirect to another host.
type errOtherHost struct{ to string }

func (e errOtherHost) Error() string {
	return fmt.Sprintf("redirect to another host (%s) not followed", e.to)
}

// redirectSameHost follows a redirect only to the host of the first request, at
// most maxRedirects times.
func redirectSameHost(req *http.Request, via []*http.Request) error {
	if !strings.EqualFold(req.URL.Hostname(), via[0].URL.Hostname()) {
		return errOtherHost{req.URL.Host}
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// Probe runs one probe of c, bounded by c.Timeout (and ctx).
func (p *Prober) Probe(ctx context.Context, c switchboard.Check) Result {
	t, err := switchboard.ParseCheckTarget(c.Target)
	if err != nil {
		return fail(err.Error())
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	var r Result
	switch t.Kind {
	case switchboard.CheckHTTP, switchboard.CheckHTTPS:
		r = p.http(ctx, c)
	case switchboard.CheckTCP:
		r = p.tcp(ctx, t)
	case switchboard.CheckGRPC:
		r = p.grpc(ctx, t)
	default:
		return fail("unknown check kind " + string(t.Kind))
	}
	if strings.HasSuffix(r.Output, timedOut) && c.Timeout > 0 {
		r.Output += " after " + c.Timeout.String()
	}
	return r
}

// timedOut ends the output of a probe that took its whole timeout.
const timedOut = "timed out"

func fail(output string) Result {
	return Result{Status: switchboard.StatusCritical, Output: output}
}

// errText is err's message without the repetition net/http and net add
// (the method and URL, which the check's target says already).
func errText(ctx context.Context, err error) string {
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
		return timedOut
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

func (p *Prober) http(ctx context.Context, c switchboard.Check) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Target, nil)
	if err != nil {
		return fail(err.Error())
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "text/plain, text/*, */*")
	resp, err := p.client.Do(req)
	if err != nil {
		var oh errOtherHost
		if errors.As(err, &oh) {
			return fail(oh.Error())
		}
		return fail(errText(ctx, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	line := "HTTP " + resp.Status
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return Result{Status: switchboard.StatusWarning, Output: line}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fail(line)
	case c.Body == "":
		return Result{Status: switchboard.StatusPassing, Output: line}
	case bytes.Contains(body, []byte(c.Body)):
		return Result{Status: switchboard.StatusPassing, Output: line + ", body holds the expected text"}
	case err != nil:
		return fail(line + ", reading the body: " + errText(ctx, err))
	}
	return fail(fmt.Sprintf("%s, the first %d bytes of the body do not hold %q", line, MaxBody, c.Body))
}

func (p *Prober) tcp(ctx context.Context, t switchboard.CheckTarget) Result {
	conn, err := p.dial(ctx, "tcp", t.Address())
	if err != nil {
		return fail("TCP connect: " + errText(ctx, err))
	}
	conn.Close()
	return Result{Status: switchboard.StatusPassing, Output: "TCP connect " + t.Address() + ": success"}
}

func (p *Prober) grpc(ctx context.Context, t switchboard.CheckTarget) Result {
	// passthrough: the address is dialled as it is, like the other kinds'
	// (the system resolver), not through gRPC's own DNS resolver.
	conn, err := grpc.NewClient("passthrough:///"+t.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(UserAgent))
	if err != nil {
		return fail("gRPC: " + err.Error())
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: t.Path})
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fail("gRPC health: " + timedOut)
		}
		s := status.Convert(err)
		return fail("gRPC health: " + s.Code().String() + ": " + s.Message())
	}
	line := "gRPC health: " + resp.GetStatus().String()
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fail(line)
	}
	return Result{Status: switchboard.StatusPassing, Output: line}
}
