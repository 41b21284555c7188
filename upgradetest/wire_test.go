package upgradetest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/switchboard-io/switchboard/grpcwire/modulepb"
)

// startBroker runs bin's embedded NATS broker (JetStream on, its store in
// a temporary directory) on a free loopback port and returns its URL: a
// broker of the test's own, so the streams the JetStream wire creates go
// with it.
func startBroker(t *testing.T, bin string) string {
	t.Helper()
	p := start(t, "nats", bin, nil, "nats", "--listen", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "nats"))
	re := regexp.MustCompile(`serving (nats://[0-9.]+:[0-9]+)`)
	l := p.waitLine(t, "the NATS broker to serve", re.MatchString)
	return re.FindStringSubmatch(l)[1]
}

// startRegistered runs a process that prints its registered instance as
// its first line (echo, register) and returns that instance's address.
func startRegistered(t *testing.T, name, bin string, env []string, args ...string) string {
	t.Helper()
	addr, _ := startRegisteredProc(t, name, bin, env, args...)
	return addr
}

func startRegisteredProc(t *testing.T, name, bin string, env []string, args ...string) (string, *proc) {
	t.Helper()
	p := start(t, name, bin, env, args...)
	first := p.waitLine(t, name+" to register", func(string) bool { return true })
	return decodeLine[struct{ Address string }](t, p, first).Address, p
}

// send runs bin's `send` of payload to module and returns the reply it
// printed, and its stderr.
func send(t *testing.T, bin, dsn string, env []string, module, payload string) (string, string) {
	t.Helper()
	out, stderr, err := run(t, bin, env, "--dsn", dsn, "--log-level", "info", "send", "--to", "f."+module+".n:in", "--data", payload)
	if err != nil {
		t.Fatalf("%s send to %s: %v: %s", bin, module, err, stderr)
	}
	return strings.TrimSuffix(out, "\n"), stderr
}

// The module wires across releases: an old `echo` answers a new `send`
// and a new `echo` an old `send`, over gRPC, NATS request/reply and the
// JetStream wire (a broker of the test's own). The modules find each
// other in a catalog served by a new serve.
func TestModuleWiresAcrossReleases(t *testing.T) {
	old, cur := binaries(t)
	url := startServe(t, "serve", cur, "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
	broker := startBroker(t, cur)
	for _, w := range []struct {
		name, tag string
		env       []string
		logged    string // the wire both sides log at info
	}{
		{"grpc", "grpc", nil, ""},
		{"nats core", "core", []string{"TINY_NATS_URL=" + broker, "TINY_NATS_TRANSPORT=core"}, "transport: core req/reply"},
		{"nats jetstream", "js", []string{"TINY_NATS_URL=" + broker, "TINY_NATS_TRANSPORT=jetstream"}, "transport: jetstream-backed durable wire"},
	} {
		t.Run(w.name, func(t *testing.T) {
			env := append(append([]string(nil), clientEnv...), w.env...)
			for _, c := range []struct{ echo, sender string }{{old, cur}, {cur, old}} {
				module := "upg-" + release(c.echo) + "-echo-" + w.tag
				addr, echo := startRegisteredProc(t, release(c.echo)+" echo", c.echo, env,
					"--dsn", url, "--log-level", "info", "echo", "--name", module)
				if isNATS := strings.HasPrefix(addr, "nats://"); isNATS != (w.logged != "") {
					t.Fatalf("%s echo registered %s on the %s wire", release(c.echo), addr, w.name)
				}
				payload := fmt.Sprintf("%s send to %s echo over %s", release(c.sender), release(c.echo), w.name)
				got, stderr := send(t, c.sender, url, env, module, payload)
				if got != payload {
					t.Fatalf("%s: reply %q, want %q", payload, got, payload)
				}
				if !strings.Contains(stderr, w.logged) || !strings.Contains(echo.errText(), w.logged) {
					t.Fatalf("%s: the sender or the echo is not on the %s wire (want %q logged); send's stderr:\n%s", payload, w.name, w.logged, stderr)
				}
			}
		})
	}
}

// unknownField is a protobuf field no release knows (number 99, bytes),
// as a newer peer's message may carry.
var unknownField = protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("from a newer release"))

// newerModule is a gRPC module as a newer release might serve it: it
// answers every message with "newer:" and its payload, with response
// headers and trailers no release knows and an unknown field in the
// response.
type newerModule struct {
	modulepb.UnimplementedModuleServiceServer
	calls atomic.Int64
}

func (m *newerModule) Message(ctx context.Context, req *modulepb.MessageRequest) (*modulepb.MessageResponse, error) {
	m.calls.Add(1)
	grpc.SetHeader(ctx, metadata.Pairs("x-newer-header", "1"))
	grpc.SetTrailer(ctx, metadata.Pairs("x-newer-trailer", "1"))
	resp := &modulepb.MessageResponse{Data: append([]byte("newer:"), req.Payload...)}
	resp.ProtoReflect().SetUnknown(unknownField)
	return resp, nil
}

// What a newer peer adds to the module wires (headers, gRPC metadata,
// protobuf fields) the old release ignores: an old echo answers requests
// that carry them, and an old send reads replies that carry them.
func TestOldWiresIgnoreNewerHeaders(t *testing.T) {
	old, cur := binaries(t)
	url := startServe(t, "serve", cur, "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("grpc", func(t *testing.T) {
		// A request to an old echo with metadata and a field it does not
		// know.
		addr := startRegistered(t, "old echo", old, clientEnv, "--dsn", url, "echo", "--name", "upg-old-echo-newer")
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		req := &modulepb.MessageRequest{ID: "m-1", From: "signal", To: "f.upg-old-echo-newer.n:in", EdgeID: "e-1", Payload: []byte("hello")}
		req.ProtoReflect().SetUnknown(unknownField)
		mctx := metadata.AppendToOutgoingContext(ctx, "x-message-depth", "1", "x-newer-header", "1")
		resp, err := modulepb.NewModuleServiceClient(cc).Message(mctx, req)
		if err != nil || string(resp.GetData()) != "hello" || resp.GetHasError() {
			t.Fatalf("old echo, a request with unknown metadata and field: %v, %v", resp, err)
		}

		// A reply to an old send with headers, trailers and a field it
		// does not know.
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, mod := grpc.NewServer(), &newerModule{}
		modulepb.RegisterModuleServiceServer(srv, mod)
		go srv.Serve(lis)
		defer srv.Stop()
		startRegistered(t, "newer module", old, clientEnv, "--dsn", url, "register", "--name", "upg-newer-grpc", "--type", "module",
			"--address", lis.Addr().String())
		if got, _ := send(t, old, url, clientEnv, "upg-newer-grpc", "hello"); got != "newer:hello" || mod.calls.Load() != 1 {
			t.Fatalf("old send to a newer module: %q after %d calls, want \"newer:hello\" after 1", got, mod.calls.Load())
		}
	})

	t.Run("nats core", func(t *testing.T) {
		broker := startBroker(t, cur)
		env := append([]string{"TINY_NATS_URL=" + broker, "TINY_NATS_TRANSPORT=core"}, clientEnv...)
		nc, err := nats.Connect(broker)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()

		// A request to an old echo with headers it does not know.
		addr := startRegistered(t, "old echo", old, env, "--dsn", url, "echo", "--name", "upg-old-echo-newer")
		msg := nats.NewMsg(strings.TrimPrefix(addr, "nats://"))
		for k, v := range map[string]string{"x-from": "signal", "x-to": "f.upg-old-echo-newer.n:in", "x-edge-id": "e-1",
			"Nats-Msg-Id": "e-1", "x-message-depth": "1", "x-newer-header": "1"} {
			msg.Header.Set(k, v)
		}
		msg.Data = []byte("hello")
		reply, err := nc.RequestMsgWithContext(ctx, msg)
		if err != nil || string(reply.Data) != "hello" || reply.Header.Get("x-error") != "" {
			t.Fatalf("old echo, a request with an unknown header: %v, %v", reply, err)
		}

		// A reply to an old send with a header it does not know.
		var calls atomic.Int64
		sub, err := nc.QueueSubscribe("tinymodule.upg-newer-nats.msg", "upg-newer-nats", func(m *nats.Msg) {
			calls.Add(1)
			r := nats.NewMsg(m.Reply)
			r.Header.Set("x-newer-header", "1")
			r.Data = append([]byte("newer:"), m.Data...)
			m.RespondMsg(r)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		startRegistered(t, "newer module", old, env, "--dsn", url, "register", "--name", "upg-newer-nats", "--type", "module",
			"--address", "nats://tinymodule.upg-newer-nats.msg")
		if got, _ := send(t, old, url, env, "upg-newer-nats", "hello"); got != "newer:hello" || calls.Load() != 1 {
			t.Fatalf("old send to a newer module: %q after %d calls, want \"newer:hello\" after 1", got, calls.Load())
		}
	})
}
