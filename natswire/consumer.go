package natswire

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard/router"
)

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

// pullHeartbeat is how often the broker confirms a waiting pull request.
// Two missed in a row make the client pull again: after a cluster moves
// the consumer's leader to another server (the leader's server died), its
// pull requests are gone, and delivery resumes within 2 × pullHeartbeat
// (nats.go's default, half the 30 s pull expiry, would stall it for 30 s).
const pullHeartbeat = 2 * time.Second

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
		}, jetstream.PullHeartbeat(pullHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
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
	out, err := w.dispatch(ctx, h, hdr, m.Data())
	close(stop)
	<-ticking
	if err != nil && stopped(ctx) {
		// The receiver stopped and ended the handler: not the handler's
		// failure. No reply (the sender keeps waiting) and no Term: the
		// message goes to another replica at once.
		if nerr := m.Nak(); nerr != nil {
			w.opts.Logger.Info("jetstream transport: nak on shutdown failed (the message will be redelivered after AckWait)", "to", hdr.Get(HeaderTo), "err", nerr)
		}
		return
	}
	if inbox := hdr.Get(HeaderReplyInbox); inbox != "" {
		if perr := w.respond(inbox, out, err); perr != nil {
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
