package pool

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-io/switchboard/internal/testkit"
)

// gateHandler is a slog handler that holds the first record with message
// msg (logged by one of the pool's goroutines) until release is closed,
// and counts the records whose handling ended after Close returned.
type gateHandler struct {
	msg     string
	entered chan struct{}
	release chan struct{}
	once    *sync.Once
	closed  *atomic.Bool // set once Close has returned
	late    *atomic.Int64
}

func newGateHandler(msg string) *gateHandler {
	return &gateHandler{msg: msg, entered: make(chan struct{}), release: make(chan struct{}),
		once: new(sync.Once), closed: new(atomic.Bool), late: new(atomic.Int64)}
}

func (h *gateHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *gateHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *gateHandler) WithGroup(string) slog.Handler            { return h }

func (h *gateHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() {
			close(h.entered)
			<-h.release
		})
	}
	if h.closed.Load() {
		h.late.Add(1)
	}
	return nil
}

// goroutineID returns the id of the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// goroutinesIn returns the stacks of the goroutines running fn (a function
// name such as "pool.(*Pool).prewarm") that were created by goroutine
// creator.
func goroutinesIn(fn, creator string) []string {
	var out []string
	for _, g := range allStacks() {
		if strings.Contains(g, fn+"(") && strings.Contains(g, " in goroutine "+creator+"\n") {
			out = append(out, g)
		}
	}
	return out
}

func allStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// closeIsWaiting reports whether a goroutine is blocked in a WaitGroup wait
// inside (*Pool).Close.
func closeIsWaiting() bool {
	for _, g := range allStacks() {
		if strings.Contains(g, "sync.(*WaitGroup).Wait") && strings.Contains(g, "pool.(*Pool).Close") {
			return true
		}
	}
	return false
}

// No pre-warm goroutine outlives Close, even when Close follows the
// registration at once (before the goroutine had a chance to run).
func TestCloseWaitsForPrewarm(t *testing.T) {
	self := goroutineID()
	for i := 0; i < 100; i++ {
		p := New(Options{Logger: quiet})
		p.Register("mod-p", "127.0.0.1:1")
		p.Close()
		if gs := goroutinesIn("pool.(*Pool).prewarm", self); len(gs) > 0 {
			t.Fatalf("pre-warm goroutine still running after Close:\n%s", gs[0])
		}
	}
}

// Close waits for the connection-watch goroutine: while it is still inside
// the logger, Close does not return, and nothing is logged after Close
// returned.
func TestCloseWaitsForWatch(t *testing.T) {
	srv := startServer(t, nil)
	h := newGateHandler("address pool: connection pre-warmed")
	p := New(Options{Logger: slog.New(h)})
	released := false
	defer func() {
		if !released {
			close(h.release) // let the leaked goroutine finish
		}
	}()
	p.Register("mod-g", srv.addr)
	select {
	case <-h.entered:
	case <-time.After(waitFor):
		t.Fatal("the connection was never reported ready")
	}

	closed := make(chan struct{})
	go func() {
		p.Close()
		h.closed.Store(true)
		close(closed)
	}()
	testkit.WaitUntil(t, "Close waiting for the pool's goroutines", func() bool {
		select {
		case <-closed:
			t.Fatal("Close returned while the watch goroutine was still running")
		default:
		}
		return closeIsWaiting()
	})
	close(h.release)
	released = true
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return within 20 s of the watch goroutine's release")
	}
	if n := h.late.Load(); n != 0 {
		t.Fatalf("%d records logged after Close returned", n)
	}
}
