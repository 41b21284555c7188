package natswire

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/router"
)

// Serve receives the messages of module and hands each to h until ctx
// ends, then stops as Receiver.Close does. See Listen.
func (w *Wire) Serve(ctx context.Context, module string, h router.Handler) error {
	r, err := w.Listen(module, h)
	if err != nil {
		return err
	}
	<-ctx.Done()
	r.Close()
	return nil
}

// Receiver is a module being served by Listen.
type Receiver struct {
	w      *Wire
	module string
	s      *serving
	stop   context.CancelFunc // ends the receiving (not the handlers)
	done   chan struct{}      // closed when the receiving goroutines have ended
	once   sync.Once
}

// Listen starts receiving the messages of module and returns once they
// arrive: every message goes to h in its own goroutine (a handler that
// sends to its own module does not block the next delivery).
//
// Core mode: a queue subscription on <prefix>.<module>.msg (queue = module,
// replicas share the load) and a plain one on <prefix>.<module>.sysmsg
// (every replica). JetStream mode: the durable consumer named module on the
// edge stream and this replica's consumer on the system stream, both
// re-created when the broker loses them.
func (w *Wire) Listen(module string, h router.Handler) (*Receiver, error) {
	if !switchboard.IsSanitized(module) {
		return nil, router.Permanent(router.CodeInvalidName, fmt.Sprintf("natswire: module %q is not a sanitised name", module))
	}
	if h == nil {
		return nil, router.Permanent(router.CodeNoHandler, "natswire: nil handler")
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &Receiver{w: w, module: module, s: newServing(w.opts.GracePeriod), stop: stop, done: make(chan struct{})}
	var err error
	if w.opts.Mode == JetStream {
		err = w.listenJS(ctx, r, h)
	} else {
		err = w.listenCore(ctx, r, h)
	}
	if err != nil {
		stop()
		return nil, err
	}
	return r, nil
}

// Close stops receiving, lets in-flight handlers finish for the grace
// period, then ends their contexts and returns once they have returned. A
// handler that fails once its context ended this way is not answered with
// its error: on JetStream its message is negatively acknowledged (another
// replica takes it, and the sender gets that replica's reply), on core NATS
// the sender gets a retryable unavailable error. It is idempotent.
func (r *Receiver) Close() {
	r.once.Do(func() {
		r.stop()
		<-r.done
		r.s.finish(r.w, r.module)
	})
}

func (w *Wire) listenCore(ctx context.Context, r *Receiver, h router.Handler) error {
	module := r.module
	subject := w.opts.Prefix + "." + module + ".msg"
	sysSubject := w.opts.Prefix + "." + module + ".sysmsg"
	cb := func(m *nats.Msg) {
		r.s.spawn(func(ctx context.Context) { w.handleCore(ctx, h, m) })
	}
	sub, err := w.nc.QueueSubscribe(subject, module, cb)
	if err != nil {
		return fmt.Errorf("natswire: subscribe %s: %w", subject, err)
	}
	sys, err := w.nc.Subscribe(sysSubject, cb)
	if err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("natswire: subscribe %s: %w", sysSubject, err)
	}
	// Make sure the broker has the interest before returning, so the
	// caller can send at once.
	if err := w.nc.FlushTimeout(5 * time.Second); err != nil {
		w.opts.Logger.Warn("nats transport: flush after subscribe", "err", err)
	}
	w.opts.Logger.Info("nats transport: receiver subscribed", "subject", subject, "queue", module, "sysmsg", sysSubject)
	go func() {
		defer close(r.done)
		<-ctx.Done()
		for _, x := range []*nats.Subscription{sub, sys} {
			if err := x.Drain(); err != nil {
				w.opts.Logger.Info("nats transport: drain on shutdown", "subject", x.Subject, "err", err)
			}
		}
		// Drain is asynchronous: wait until the callbacks of the messages
		// already received have run (they only spawn handlers).
		deadline := time.Now().Add(w.opts.GracePeriod)
		for (sub.IsValid() || sys.IsValid()) && time.Now().Before(deadline) && !w.nc.IsClosed() {
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return nil
}

// handleCore runs one core request and responds when the sender waits.
func (w *Wire) handleCore(ctx context.Context, h router.Handler, m *nats.Msg) {
	out, err := w.dispatch(ctx, h, m.Header, m.Data)
	if m.Reply == "" {
		return
	}
	if err != nil && stopped(ctx) {
		// The receiver stopped and ended the handler: not the handler's
		// failure, and another replica may take the retry.
		err = router.Transient(router.CodeUnavailable, "the receiving module stopped before its handler finished: "+err.Error())
	}
	if rerr := w.respond(m.Reply, out, err); rerr != nil {
		w.opts.Logger.Info("nats transport: respond failed", "to", m.Header.Get(HeaderTo), "err", rerr)
	}
}

// stopped reports whether ctx, a handler's context from serving, has
// ended: only the receiver's stop (after its grace period) ends it.
func stopped(ctx context.Context) bool { return ctx.Err() != nil }

// respond publishes a handler's outcome to subject. A reply the broker
// would refuse for its size (a result above max_payload) is replaced by a
// resource_exhausted error, so the sender does not wait for a reply that
// never comes.
func (w *Wire) respond(subject string, out []byte, err error) error {
	reply := &nats.Msg{Subject: subject, Header: replyHeader(out, err)}
	if err == nil {
		reply.Data = out
	}
	perr := w.nc.PublishMsg(reply)
	if errors.Is(perr, nats.ErrMaxPayload) {
		e := router.Permanent(router.CodeResourceExhausted, fmt.Sprintf("the reply (%d bytes) is larger than the broker's max_payload (%d bytes)", len(out), w.nc.MaxPayload()))
		perr = w.nc.PublishMsg(&nats.Msg{Subject: subject, Header: replyHeader(nil, e)})
	}
	return perr
}

// dispatch decodes a request and runs h on it.
// A panicking handler fails its message with a permanent internal error
// (logged with its stack) and the process goes on, as on the gRPC wire.
func (w *Wire) dispatch(ctx context.Context, h router.Handler, hdr nats.Header, data []byte) (out []byte, err error) {
	msg, err := incoming(hdr, data)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := recover(); p != nil {
			w.opts.Logger.Error("nats transport: handler panicked", "to", msg.To, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out, err = nil, router.Permanent(router.CodeInternal, fmt.Sprintf("handler for %s panicked: %v", msg.To, p))
		}
	}()
	return h(ctx, msg)
}

// serving owns the handler goroutines of one Serve call.
type serving struct {
	base   context.Context // handlers' parent: outlives the receiving by the grace period
	cancel context.CancelFunc
	grace  time.Duration
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool // finish has begun: late deliveries are not started
}

func newServing(grace time.Duration) *serving {
	base, cancel := context.WithCancel(context.Background())
	return &serving{base: base, cancel: cancel, grace: grace}
}

// spawn runs fn in a goroutine finish waits for. A delivery that arrives
// after finish began is dropped: unacknowledged on JetStream (so it is
// redelivered), unanswered on core NATS (the sender times out).
func (s *serving) spawn(fn func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.base)
	}()
}

// finish waits for in-flight handlers: the grace period, then their
// contexts end and it waits for them to return.
func (s *serving) finish(w *Wire, module string) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(s.grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.opts.Logger.Warn("nats transport: handlers still running after the grace period; cancelling them", "module", module, "grace", s.grace)
		s.cancel()
		<-done
	}
	s.cancel()
	w.opts.Logger.Info("nats transport: receiver stopped", "module", module)
}

// ServeEcho serves module as an echo module on nc until ctx ends (what
// `switchboard echo` runs when TINY_NATS_URL is set).
func ServeEcho(ctx context.Context, nc *nats.Conn, module string, opts Options) error {
	w, err := New(nc, opts)
	if err != nil {
		return err
	}
	defer w.Close()
	r, err := router.New(router.Options{Module: module, Logger: w.opts.Logger})
	if err != nil {
		return err
	}
	r.HandleDefault(router.Echo)
	return w.Serve(ctx, module, r.Dispatch)
}
