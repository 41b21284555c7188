package natswire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/router"
)

// MaxReplicas is the most replicas JetStream keeps of a stream.
const MaxReplicas = 5

// The SDK's stream settings.
const (
	streamMaxAge        = time.Hour
	streamDuplicates    = 2 * time.Minute
	sysInactiveConsumer = 5 * time.Minute
)

// EnsureStreams creates or updates the edge stream (work queue on
// <prefix>.*.msg, file storage, max age 1 h, duplicate window 2 min) and the
// system stream (limits retention on <prefix>.*.sysmsg) with the SDK's
// settings and Options.Replicas replicas. Sends and Serve call it by
// themselves; it is exported for tools that prepare a broker.
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
		Replicas:   w.opts.Replicas,
	}, {
		Name:       w.opts.SysStream,
		Subjects:   []string{w.opts.Prefix + ".*.sysmsg"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     streamMaxAge,
		Duplicates: streamDuplicates,
		Replicas:   w.opts.Replicas,
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
	if errors.Is(err, errWireClosed) {
		return nil, router.Permanent(router.CodeUnavailable, "natswire: send on a closed wire")
	}
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
	case <-w.replies.done:
		return nil, router.Permanent(router.CodeUnavailable, fmt.Sprintf("natswire: the wire was closed while waiting for the reply from %s", m.Subject))
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
	case errors.Is(err, nats.ErrMaxPayload):
		return router.Permanent(router.CodeResourceExhausted, fmt.Sprintf("message to %s is larger than the broker's max_payload (%d bytes)", subject, w.nc.MaxPayload()))
	}
	return router.Transient(router.CodeUnavailable, fmt.Sprintf("jetstream publish to %s: %v", subject, err))
}

// Publish sends msg without waiting for a reply. On JetStream it returns
// once the broker has stored it (the SDK's durable-run hop: Nats-Msg-Id is
// the x-step-key metadata when set, so a re-emitted step is stored once);
// on core NATS it is a plain publish (lost when nobody listens).
func (w *Wire) Publish(ctx context.Context, msg *router.Message) error {
	if msg == nil {
		return router.NoMessage()
	}
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
