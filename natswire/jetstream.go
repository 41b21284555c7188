package natswire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/router"
)

// The SDK's stream settings.
const (
	streamMaxAge        = time.Hour
	streamDuplicates    = 2 * time.Minute
	sysInactiveConsumer = 5 * time.Minute
)

// EnsureStreams creates or updates the edge stream (work queue on
// <prefix>.*.msg, file storage, max age 1 h, duplicate window 2 min) and the
// system stream (limits retention on <prefix>.*.sysmsg) with the SDK's
// settings. Sends and Serve call it by themselves; it is exported for
// tools that prepare a broker.
func (w *Wire) EnsureStreams(ctx context.Context) error {
	if w.js == nil {
		return errors.New("natswire: EnsureStreams needs the JetStream mode")
	}
	w.streamMu.Lock()
	defer w.streamMu.Unlock()
	for _, cfg := range []jetstream.StreamConfig{{
		Name:       w.opts.Stream,
		Subjects:   []string{w.opts.Prefix + ".*.msg"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.WorkQueuePolicy,
		MaxAge:     streamMaxAge,
		Duplicates: streamDuplicates,
	}, {
		Name:       w.opts.SysStream,
		Subjects:   []string{w.opts.Prefix + ".*.sysmsg"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     streamMaxAge,
		Duplicates: streamDuplicates,
	}} {
		if _, err := w.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("natswire: ensure stream %s on %s: %w", cfg.Name, cfg.Subjects[0], err)
		}
	}
	return nil
}

func (w *Wire) streamFor(nn switchboard.NodeName) string {
	if len(nn.Port) > 0 && nn.Port[0] == '_' {
		return w.opts.SysStream
	}
	return w.opts.Stream
}

// sendJS publishes m to the stream with a reply inbox and waits for the
// receiver's core reply. The publish acknowledgement only says the broker
// stored the request; a de-duplicated request fails at once (nobody would
// ever answer it).
func (w *Wire) sendJS(ctx context.Context, nn switchboard.NodeName, m *nats.Msg) ([]byte, error) {
	inbox, ch, cancel, err := w.replies.register()
	if err != nil {
		return nil, router.Transient(router.CodeUnavailable, "natswire: reply inbox: "+err.Error())
	}
	defer cancel()
	m.Header.Set(HeaderReplyInbox, inbox)
	ack, err := w.publishJS(ctx, w.streamFor(nn), m)
	if err != nil {
		return nil, w.jsError(ctx, nn, m.Subject, err)
	}
	if ack.Duplicate {
		return nil, router.Permanent(CodeDuplicate, fmt.Sprintf("stream %s de-duplicated the request to %s (seq %d): no receiver will answer it", ack.Stream, m.Subject, ack.Sequence))
	}
	select {
	case r := <-ch:
		return decodeReply(r.Header, r.Data)
	case <-ctx.Done():
		return nil, w.jsError(ctx, nn, m.Subject, ctx.Err())
	}
}

// publishJS publishes to stream, creating the streams when the broker has
// none (first use, or a broker that lost its store) and trying once more.
func (w *Wire) publishJS(ctx context.Context, stream string, m *nats.Msg) (*jetstream.PubAck, error) {
	if !w.streamsOK.Load() {
		if err := w.EnsureStreams(ctx); err != nil {
			return nil, err
		}
		w.streamsOK.Store(true)
	}
	ack, err := w.js.PublishMsg(ctx, m, jetstream.WithExpectStream(stream))
	if err != nil && ctx.Err() == nil && (errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, nats.ErrNoResponders)) {
		w.streamsOK.Store(false)
		if eerr := w.EnsureStreams(ctx); eerr != nil {
			return nil, fmt.Errorf("%w (then: %v)", err, eerr)
		}
		w.streamsOK.Store(true)
		ack, err = w.js.PublishMsg(ctx, m, jetstream.WithExpectStream(stream))
	}
	return ack, err
}

func (w *Wire) jsError(ctx context.Context, nn switchboard.NodeName, subject string, err error) error {
	switch {
	case errors.Is(err, context.Canceled) || ctx.Err() == context.Canceled:
		return &router.Error{Code: router.CodeCanceled, Message: fmt.Sprintf("request to %s: %v", subject, err)}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
		return router.Transient(router.CodeDeadlineExceeded, fmt.Sprintf("no reply from module %q (%s) in time", nn.Module, subject))
	case errors.Is(err, nats.ErrConnectionClosed):
		return router.Permanent(router.CodeUnavailable, "nats connection is closed")
	}
	return router.Transient(router.CodeUnavailable, fmt.Sprintf("jetstream publish to %s: %v", subject, err))
}

// Publish sends msg without waiting for a reply. On JetStream it returns
// once the broker has stored it (the SDK's durable-run hop: Nats-Msg-Id is
// the x-step-key metadata when set, so a re-emitted step is stored once);
// on core NATS it is a plain publish (lost when nobody listens).
func (w *Wire) Publish(ctx context.Context, msg *router.Message) error {
	nn, err := router.ParseTo(msg.To)
	if err != nil {
		return err
	}
	m, err := w.request(w.subject(nn), msg)
	if err != nil {
		return err
	}
	if w.opts.Mode == Core {
		if err := w.nc.PublishMsg(m); err != nil {
			return w.requestError(ctx, nn, m.Subject, err)
		}
		return nil
	}
	if k := msg.Metadata[HeaderStepKey]; k != "" {
		m.Header.Set(HeaderMsgID, headerValue(k))
	}
	ack, err := w.publishJS(ctx, w.streamFor(nn), m)
	if err != nil {
		return w.jsError(ctx, nn, m.Subject, err)
	}
	if ack.Duplicate {
		w.opts.Logger.Info("jetstream transport: durable publish deduped", "to", msg.To, "stepKey", msg.Metadata[HeaderStepKey])
	}
	return nil
}

// listenJS creates the module's durable consumer and this replica's
// system consumer and keeps them consuming until ctx ends.
func (w *Wire) listenJS(ctx context.Context, r *Receiver, h router.Handler) error {
	if err := checkToken("instance", w.opts.Instance); err != nil {
		return err
	}
	module := r.module
	edge := jetstream.ConsumerConfig{
		Durable:       module,
		FilterSubject: w.opts.Prefix + "." + module + ".msg",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.opts.AckWait,
		MaxDeliver:    w.opts.MaxDeliver,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
	sys := jetstream.ConsumerConfig{
		Durable:           module + "-sys-" + w.opts.Instance,
		FilterSubject:     w.opts.Prefix + "." + module + ".sysmsg",
		DeliverPolicy:     jetstream.DeliverNewPolicy,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           w.opts.AckWait,
		MaxDeliver:        w.opts.MaxDeliver,
		ReplayPolicy:      jetstream.ReplayInstantPolicy,
		InactiveThreshold: sysInactiveConsumer,
	}
	type job struct {
		stream string
		cfg    jetstream.ConsumerConfig
		first  jetstream.Consumer
	}
	jobs := []*job{{stream: w.opts.Stream, cfg: edge}, {stream: w.opts.SysStream, cfg: sys}}
	for _, j := range jobs {
		c, err := w.consumer(ctx, j.stream, j.cfg)
		if err != nil {
			return fmt.Errorf("natswire: consumer %s on %s: %w", j.cfg.Durable, j.stream, err)
		}
		j.first = c
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.supervise(ctx, r.s, j.stream, j.cfg, j.first, h)
		}()
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return nil
}

// supervise keeps one durable consumer alive for the life of ctx: when the
// broker loses the stream or the consumer (a restart without its store, a
// deletion), it re-creates both and consumes again, without a module
// restart. Reconnects of the connection itself are nats.go's.
func (w *Wire) supervise(ctx context.Context, s *serving, stream string, cfg jetstream.ConsumerConfig, cons jetstream.Consumer, h router.Handler) {
	log := w.opts.Logger.With("stream", stream, "consumer", cfg.Durable, "subject", cfg.FilterSubject)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		var err error
		if cons == nil {
			cons, err = w.consumer(ctx, stream, cfg)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("jetstream transport: consumer not ready; retrying", "err", err, "retry_in", backoff)
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		lost := make(chan error, 1)
		cc, err := cons.Consume(func(m jetstream.Msg) {
			s.spawn(func(hctx context.Context) { w.handleJS(hctx, h, m) })
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if isGone(err) {
				select {
				case lost <- err:
				default:
				}
				return
			}
			log.Debug("jetstream transport: consume", "err", err)
		}))
		if err != nil {
			log.Warn("jetstream transport: consume failed; retrying", "err", err)
			cons = nil
			sleepCtx(ctx, backoff)
			continue
		}
		log.Info("jetstream transport: receiver subscribed")
		if !w.watch(ctx, cons, lost, log) {
			cc.Drain()
			select {
			case <-cc.Closed():
			case <-time.After(w.opts.GracePeriod):
				cc.Stop()
			}
			return
		}
		cc.Stop()
		cons = nil
		log.Warn("jetstream transport: consumer lost; re-creating stream and consumer")
		w.streamsOK.Store(false)
	}
}

// watch returns false when ctx ends, true when the consumer is gone.
func (w *Wire) watch(ctx context.Context, cons jetstream.Consumer, lost <-chan error, log interface {
	Debug(string, ...any)
}) bool {
	t := time.NewTicker(w.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-lost:
			return true
		case <-t.C:
			ictx, cancel := context.WithTimeout(ctx, w.opts.HealthInterval)
			_, err := cons.Info(ictx)
			cancel()
			if err != nil && isGone(err) {
				return true
			}
			if err != nil {
				log.Debug("jetstream transport: consumer check", "err", err)
			}
		}
	}
}

func isGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerDoesNotExist)
}

func (w *Wire) consumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cons, err := w.js.CreateOrUpdateConsumer(cctx, stream, cfg)
	if err != nil && errors.Is(err, jetstream.ErrStreamNotFound) {
		if eerr := w.EnsureStreams(cctx); eerr != nil {
			return nil, eerr
		}
		cons, err = w.js.CreateOrUpdateConsumer(cctx, stream, cfg)
	}
	return cons, err
}

// handleJS runs one delivery: in-progress acks while the handler runs, the
// reply over core NATS to x-reply-inbox, then a confirmed ack on success;
// on failure Term (single shot), or Nak when nobody waits for a reply and
// the error is retryable (the SDK's rule).
func (w *Wire) handleJS(ctx context.Context, h router.Handler, m jetstream.Msg) {
	stop := make(chan struct{})
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		t := time.NewTicker(w.opts.InProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	hdr := m.Headers()
	out, err := dispatch(ctx, h, hdr, m.Data())
	close(stop)
	<-ticking
	if inbox := hdr.Get(HeaderReplyInbox); inbox != "" {
		reply := &nats.Msg{Subject: inbox, Header: replyHeader(out, err)}
		if err == nil {
			reply.Data = out
		}
		if perr := w.nc.PublishMsg(reply); perr != nil {
			w.opts.Logger.Info("jetstream transport: publish reply failed", "to", hdr.Get(HeaderTo), "err", perr)
		}
	} else if err != nil && router.AsError(err).Retryable {
		_ = m.Nak()
		return
	}
	if err != nil {
		if terr := m.Term(); terr != nil {
			w.opts.Logger.Info("jetstream transport: term failed", "err", terr)
		}
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	aerr := m.DoubleAck(actx)
	cancel()
	if aerr != nil {
		w.opts.Logger.Info("jetstream transport: ack failed (the message will be redelivered)", "to", hdr.Get(HeaderTo), "err", aerr)
	}
	if w.ackHook != nil {
		w.ackHook(hdr, aerr)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// inboxMux receives every JetStream reply of a wire on one wildcard
// subscription (no subscribe/unsubscribe round trip per request).
type inboxMux struct {
	nc *nats.Conn

	mu      sync.Mutex
	prefix  string
	sub     *nats.Subscription
	pending map[string]chan *nats.Msg
	seq     uint64
	closed  bool
}

func newInboxMux(nc *nats.Conn) *inboxMux {
	return &inboxMux{nc: nc, pending: map[string]chan *nats.Msg{}}
}

// register returns a fresh reply subject and the channel its first reply
// arrives on; cancel forgets it.
func (x *inboxMux) register() (string, <-chan *nats.Msg, func(), error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return "", nil, nil, errors.New("wire closed")
	}
	if x.sub == nil {
		x.prefix = nats.NewInbox()
		sub, err := x.nc.Subscribe(x.prefix+".*", x.deliver)
		if err != nil {
			return "", nil, nil, err
		}
		x.sub = sub
	}
	x.seq++
	token := strconv.FormatUint(x.seq, 36)
	ch := make(chan *nats.Msg, 1)
	x.pending[token] = ch
	return x.prefix + "." + token, ch, func() {
		x.mu.Lock()
		delete(x.pending, token)
		x.mu.Unlock()
	}, nil
}

func (x *inboxMux) deliver(m *nats.Msg) {
	x.mu.Lock()
	ch := x.pending[m.Subject[min(len(x.prefix)+1, len(m.Subject)):]]
	x.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m: // the first reply wins (several replicas may answer a sysmsg)
		default:
		}
	}
}

func (x *inboxMux) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	x.closed = true
	if x.sub != nil {
		_ = x.sub.Unsubscribe()
	}
}
