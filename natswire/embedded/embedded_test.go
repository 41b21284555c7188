package embedded

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// settleGoroutines polls (bounded) until the goroutine count is back to at
// most base, and reports the count it ended at.
func settleGoroutines(base int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 500 && n > base; i++ {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// A round trip through JetStream, then Shutdown (twice: idempotent) leaves
// no goroutine of the broker behind.
func TestStartServeShutdown(t *testing.T) {
	base := runtime.NumGoroutine()
	s, err := Start(Options{Dir: t.TempDir(), Port: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") || s.Addr() == nil {
		t.Fatalf("url %q addr %v", s.ClientURL(), s.Addr())
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "t", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Shutdown()
	s.Shutdown()
	if n := settleGoroutines(base); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Shutdown, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// A port that is taken fails Start at once with the reason, not with "not
// ready" after ReadyTimeout.
func TestStartPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	base := runtime.NumGoroutine()
	_, err = Start(Options{Dir: t.TempDir(), Port: port, Logger: quiet})
	if err == nil {
		t.Fatal("Start succeeded on a port in use")
	}
	if !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Fatalf("error does not say the port is in use: %v", err)
	}
	if n := settleGoroutines(base); n > base {
		t.Fatalf("%d goroutines after a failed Start, %d before", n, base)
	}
}

// Options are checked before anything is created: a bad port leaves no
// data dir behind.
func TestStartValidatesBeforeCreatingDir(t *testing.T) {
	for _, port := range []int{-2, 65536, 1 << 20} {
		dir := filepath.Join(t.TempDir(), "nats")
		_, err := Start(Options{Dir: dir, Port: port, Logger: quiet})
		var fe *switchboard.FieldError
		if !errors.As(err, &fe) || fe.Field != "port" {
			t.Fatalf("port %d: %v, want a port FieldError", port, err)
		}
		if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("port %d: the data dir was created (%v)", port, serr)
		}
	}
	if _, err := Start(Options{Port: -1, Logger: quiet}); err == nil {
		t.Fatal("Start accepted an empty data dir")
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Options{Dir: file, Port: -1, Logger: quiet}); err == nil {
		t.Fatal("Start accepted a file as data dir")
	}
}

// A store JetStream cannot use fails Start at once with JetStream's reason.
func TestStartUnusableStore(t *testing.T) {
	dir := t.TempDir()
	// nats-server keeps its streams in <Dir>/jetstream: make that a file.
	if err := os.WriteFile(filepath.Join(dir, "jetstream"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	_, err := Start(Options{Dir: dir, Port: -1, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("Start with an unusable store: %v", err)
	}
	if testing.Verbose() {
		t.Log(err)
	}
	if n := settleGoroutines(base); n > base {
		t.Fatalf("%d goroutines after a failed Start, %d before", n, base)
	}
}

// Two brokers must not share a JetStream store: a second Start on the same
// dir fails while the first runs, and succeeds once it is shut down.
func TestStartRefusesADirInUse(t *testing.T) {
	dir := t.TempDir()
	first, err := Start(Options{Dir: dir, Port: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Start(Options{Dir: dir, Port: -1, Logger: quiet})
	if err == nil {
		second.Shutdown()
		first.Shutdown()
		t.Fatal("a second broker started on a data dir in use")
	}
	if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Start: %v", err)
	}
	first.Shutdown()
	again, err := Start(Options{Dir: dir, Port: -1, Logger: quiet})
	if err != nil {
		t.Fatalf("Start after the first broker's Shutdown: %v", err)
	}
	again.Shutdown()
}

// A Start that fails (its port taken) leaves nothing it created behind:
// not the data dir and its parents when they were new, not the lock file
// or the JetStream store in a dir that existed; a store that was there
// before keeps every file.
func TestFailedStartCleansUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	root := t.TempDir()
	dir := filepath.Join(root, ".data", "nats")
	var logged strings.Builder
	if _, err := Start(Options{Dir: dir, Port: port, Logger: slog.New(slog.NewTextHandler(&logged, nil))}); err == nil {
		t.Fatal("Start succeeded on a port in use")
	}
	// The reason is Start's error, not also a log line at info or above.
	if logged.Len() != 0 {
		t.Fatalf("a failed Start logged:\n%s", logged.String())
	}
	if left := listTree(t, root); len(left) != 0 {
		t.Fatalf("a failed Start in a new dir left %v", left)
	}

	// An existing, empty dir: it stays, empty.
	empty := t.TempDir()
	if _, err := Start(Options{Dir: empty, Port: port, Logger: quiet}); err == nil {
		t.Fatal("Start succeeded on a port in use")
	}
	if left := listTree(t, empty); len(left) != 0 {
		t.Fatalf("a failed Start in an existing empty dir left %v", left)
	}

	// A dir with a store of its own: nothing of it goes.
	used := t.TempDir()
	s, err := Start(Options{Dir: used, Port: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "kept", Subjects: []string{"kept.>"}}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Shutdown()
	before := listTree(t, used)
	if _, err := Start(Options{Dir: used, Port: port, Logger: quiet}); err == nil {
		t.Fatal("Start succeeded on a port in use")
	}
	if after := listTree(t, used); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("a failed Start changed an existing store:\nbefore %v\nafter  %v", before, after)
	}
}

// listTree lists every path under root, relative to it, sorted.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
