package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
	"github.com/switchboard-io/switchboard/internal/testkit"
)

// TestEchoAndSendOverMutualTLS: echo serves with --tls-*, send reaches it
// with its own client certificate, and a send without TLS fails at once
// with a clear, non-retried error.
func TestEchoAndSendOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	dsn := "sqlite://" + filepath.Join(dir, "c.db")
	ca := testkit.NewCA(t, "cli test CA")
	srv, cli1 := ca.IssueValid(t, "echo"), ca.IssueValid(t, "send")
	caFile := testkit.WriteFile(t, dir, "ca.pem", ca.PEM)
	echo := start(t, "echo", "--dsn", dsn, "--name", "secure-echo",
		"--tls-cert", testkit.WriteFile(t, dir, "srv.pem", srv.CertPEM),
		"--tls-key", testkit.WriteFile(t, dir, "srv-key.pem", srv.KeyPEM), "--tls-ca", caFile)
	var in switchboard.Instance
	if err := json.Unmarshal([]byte(echo.line(t)), &in); err != nil {
		t.Fatal(err)
	}
	clientFlags := []string{"--tls-cert", testkit.WriteFile(t, dir, "cli.pem", cli1.CertPEM),
		"--tls-key", testkit.WriteFile(t, dir, "cli-key.pem", cli1.KeyPEM), "--tls-ca", caFile}
	code, stdout, stderr := cli(t, append([]string{"send", "--dsn", dsn, "--to", "f.secure-echo.n:in", "--data", "over mTLS"}, clientFlags...)...)
	if code != 0 || stdout != "over mTLS\n" {
		t.Fatalf("mTLS send: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	// A plaintext client calls the peer a TLS server at its second
	// connection closed before a byte (the first might be a server
	// stopping), so the send is retried until then and then stops.
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--to", "f.secure-echo.n:in", "--data", "x", "--edge-retry", "5")
	if code != 1 || !strings.Contains(stderr, "code tls_failed, retryable false") || !strings.Contains(stderr, "require TLS") {
		t.Fatalf("plaintext send to a TLS module: exit %d stderr %q", code, stderr)
	}
	code, _, stderr = cli(t, "send", "--dsn", dsn, "--to", "f.secure-echo.n:in", "--data", "x", "--tls-cert", filepath.Join(dir, "cli.pem"))
	if code != 2 || !strings.Contains(stderr, "tls_key") {
		t.Fatalf("--tls-cert without --tls-key: exit %d stderr %q", code, stderr)
	}
	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}
}

// otlpCollector is an OTLP/HTTP trace receiver recording "service span
// trace-id" of every span it gets.
func otlpCollector(t *testing.T) (url string, spans func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			svc := ""
			for _, a := range rs.Resource.GetAttributes() {
				if a.Key == "service.name" {
					svc = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					got = append(got, fmt.Sprintf("%s %s %x", svc, s.Name, s.TraceId))
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestSendVerboseTraceID: `send --verbose` prints the trace id, and with
// OTEL_EXPORTER_OTLP_ENDPOINT set both the sender and the echo module export
// their spans of that one trace.
func TestSendVerboseTraceID(t *testing.T) {
	url, spans := otlpCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "c.db")
	echo := start(t, "echo", "--dsn", dsn, "--name", "traced-echo")
	echo.line(t)
	code, stdout, stderr := cli(t, "send", "--dsn", dsn, "--to", "f.traced-echo.n:in", "--data", "hi", "--verbose")
	if code != 0 || stdout != "hi\n" {
		t.Fatalf("send: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	m := regexp.MustCompile(`trace_id ([0-9a-f]{32})\n`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no trace id in stderr %q", stderr)
	}
	for _, want := range []string{
		"switchboard-cli switchboard send " + m[1],
		"switchboard-cli switchboard.send " + m[1],
		"traced-echo switchboard.handle " + m[1],
	} {
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(spans(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the collector never got span %q; it got %q; send's stderr %q", want, spans(), stderr)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	echo.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo.wait(t); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, echo.stderr)
	}
}

// sdkPeer answers like a TinySystems SDK module: a handler error is a plain
// Go error, which grpc-go sends as status Unknown with its text only.
type sdkPeer struct {
	modulepb.UnimplementedModuleServiceServer
	calls atomic.Int64
}

func (s *sdkPeer) Message(context.Context, *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	s.calls.Add(1)
	return nil, errors.New("component: invalid settings")
}

// serveModule serves srv, a ModuleService as another implementation (the
// SDK) has it, on a loopback port until the test ends, and returns the
// address.
func serveModule(t *testing.T, srv modulepb.ModuleServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	modulepb.RegisterModuleServiceServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// TestSendToSDKPeerErrorIsNotRetried: `send --edge-retry 3` to an SDK-style
// module whose handler fails delivers the message once and reports the
// failure as permanent (it used to be delivered three times).
func TestSendToSDKPeerErrorIsNotRetried(t *testing.T) {
	peer := &sdkPeer{}
	addr := serveModule(t, peer)
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "c.db")
	reg := start(t, "register", "--dsn", dsn, "--name", "sdk-module", "--type", "module", "--address", addr)
	reg.line(t)
	code, _, stderr := cli(t, "send", "--dsn", dsn, "--to", "flow.sdk-module.node.sub:in", "--data", "x", "--edge-retry", "3")
	if code != 1 || !strings.Contains(stderr, "component: invalid settings (code remote_error, retryable false)") || strings.Contains(stderr, "attempts") {
		t.Fatalf("send: exit %d stderr %q", code, stderr)
	}
	if n := peer.calls.Load(); n != 1 {
		t.Fatalf("the SDK peer's handler ran %d times, want 1", n)
	}
	reg.cmd.Process.Signal(syscall.SIGTERM)
	if err := reg.wait(t); err != nil {
		t.Fatalf("register exit: %v", err)
	}
}

// sdkRunner answers like a TinySystems SDK node's runner: it takes the
// incoming payload only from "signal"; from another node it runs with its
// edge's configuration instead (here: it says so).
type sdkRunner struct {
	modulepb.UnimplementedModuleServiceServer
}

func (sdkRunner) Message(_ context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	if req.From != "signal" {
		return &modulepb.MessageResponse{Data: []byte("edge configuration, from " + req.From)}, nil
	}
	return &modulepb.MessageResponse{Data: req.Payload}, nil
}

// TestSendInjectsAsSignal: `send` comes from "signal" by default, so that
// an SDK node uses its payload; --from names a sending node instead, and
// anything else is refused before a message is sent.
func TestSendInjectsAsSignal(t *testing.T) {
	addr := serveModule(t, sdkRunner{})
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "c.db")
	cat := openCatalog(t, dsn)
	if _, err := cat.Register(t.Context(), switchboard.Instance{Name: "sdk-module", Type: "module", Address: addr}); err != nil {
		t.Fatal(err)
	}
	send := func(args ...string) (int, string, string) {
		return cli(t, append([]string{"send", "--dsn", dsn, "--to", "flow.sdk-module.node:in", "--data", "the payload"}, args...)...)
	}
	if code, stdout, stderr := send(); code != 0 || stdout != "the payload\n" {
		t.Fatalf("send: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := send("--from", "flow.tester.node-t:out"); code != 0 || stdout != "edge configuration, from flow.tester.node-t:out\n" {
		t.Fatalf("send --from: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	for _, bad := range []string{"", "switchboard-cli", "flow.tester.node-t", "flow.tester.node-t:out\n"} {
		code, stdout, stderr := send("--from", bad)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "--from") || !strings.Contains(stderr, `"signal"`) {
			t.Fatalf("send --from %q: exit %d stdout %q stderr %q", bad, code, stdout, stderr)
		}
	}
}
