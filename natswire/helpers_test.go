package natswire

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchboard-io/switchboard/natswire/embedded"
	"github.com/switchboard-io/switchboard/router"
	"github.com/switchboard-io/switchboard/router/routertest"
)

// sharedURL is this machine's NATS server (JetStream on). Tests on it use a
// unique subject prefix and never create a stream there.
const sharedURL = "nats://127.0.0.1:4222"

const waitFor = 30 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func testLogger() *slog.Logger {
	if os.Getenv("NATSWIRE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return quiet
}

// uniquePrefix returns a subject prefix (and stream-name part) no other
// test uses.
func uniquePrefix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "sbt" + hex.EncodeToString(b[:])
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := Connect(url, ConnectOptions{Logger: testLogger(), ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startBroker starts an embedded broker with its store in dir on port (-1:
// any free port).
func startBroker(t testing.TB, dir string, port int) *embedded.Server {
	t.Helper()
	s, err := embedded.Start(embedded.Options{Dir: dir, Port: port, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func newWire(t testing.TB, nc *nats.Conn, opts Options) *Wire {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = 3 * time.Second
	}
	w, err := New(nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func listen(t testing.TB, w *Wire, module string, h router.Handler) *Receiver {
	t.Helper()
	r, err := w.Listen(module, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// fabric serves every module on its own connection (as separate processes
// would) with the same options, and sends through w.
func fabric(t *testing.T, url string, opts Options, durable bool) routertest.Fabric {
	sender := newWire(t, connect(t, url), opts)
	return routertest.Fabric{
		Wire:    sender,
		Durable: durable,
		Serve: func(t testing.TB, module string, h router.Handler) {
			listen(t, newWire(t, connect(t, url), opts), module, h)
		},
	}
}

// within returns the next value of ch, failing the test after waitFor.
func within[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatal("nothing arrived in time")
		var zero T
		return zero
	}
}

// waitDone waits for done, failing the test after waitFor.
func waitDone(t testing.TB, done <-chan struct{}) {
	t.Helper()
	within(t, done)
}
