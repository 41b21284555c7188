package natswire

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/internal/textcut"
	"github.com/switchboard-io/switchboard/router"
)

// Wire sends messages to modules over NATS and serves a module's subjects.
// It is safe for concurrent use; Close releases its reply subscription
// (the connection stays the caller's).
type Wire struct {
	nc   *nats.Conn
	js   jetstream.JetStream // JetStream mode only
	opts Options

	replies *inboxMux // JetStream replies, created on first send

	streamMu  sync.Mutex  // serialises stream creation
	streamsOK atomic.Bool // EnsureStreams succeeded and no publish found them missing since

	ackHook func(nats.Header, error) // tests: called after each confirmed (or failed) ack
}

// New returns a wire over nc. In JetStream mode the streams are created or
// updated lazily by the first send or Serve, so a wire can be built while
// the broker is still starting.
func New(nc *nats.Conn, opts Options) (*Wire, error) {
	if nc == nil {
		return nil, errors.New("natswire: nil connection")
	}
	opts.defaults()
	if opts.Replicas < 1 || opts.Replicas > MaxReplicas {
		return nil, &switchboard.FieldError{Field: "nats.stream_replicas", Value: strconv.Itoa(opts.Replicas), Reason: fmt.Sprintf("want 1 to %d servers keeping each stream", MaxReplicas)}
	}
	for _, f := range []struct{ field, v string }{{"prefix", opts.Prefix}, {"stream", opts.Stream}, {"sys stream", opts.SysStream}} {
		if err := checkToken(f.field, f.v); err != nil {
			return nil, err
		}
	}
	if opts.Instance == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.Instance = hex.EncodeToString(b[:])
	}
	w := &Wire{nc: nc, opts: opts}
	if opts.Mode == JetStream {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, fmt.Errorf("natswire: jetstream: %w", err)
		}
		w.js = js
		w.replies = newInboxMux(nc)
	}
	return w, nil
}

// Mode returns the wire's mode.
func (w *Wire) Mode() Mode { return w.opts.Mode }

// Conn returns the wire's connection.
func (w *Wire) Conn() *nats.Conn { return w.nc }

// Close releases the reply subscription of the JetStream mode; sends still
// waiting for a reply then fail at once (unavailable). It is idempotent;
// the connection is not closed.
func (w *Wire) Close() {
	if w.replies != nil {
		w.replies.close()
	}
}

// subject returns the subject a message to nn goes to: .sysmsg for ports
// starting with '_', else .msg.
func (w *Wire) subject(nn switchboard.NodeName) string {
	if strings.HasPrefix(nn.Port, "_") {
		return w.opts.Prefix + "." + nn.Module + ".sysmsg"
	}
	return w.opts.Prefix + "." + nn.Module + ".msg"
}

// Send delivers msg to its destination module and returns the result. It
// implements router.Wire. The caller's deadline bounds the wait; without
// one the wire waits RequestTimeout (5 minutes). Failures are
// *router.Error values.
func (w *Wire) Send(ctx context.Context, msg *router.Message) ([]byte, error) {
	if msg == nil {
		return nil, router.NoMessage()
	}
	nn, err := router.ParseTo(msg.To)
	if err != nil {
		return nil, err
	}
	m, err := w.request(w.subject(nn), msg)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.opts.RequestTimeout)
		defer cancel()
	}
	if w.opts.Mode == JetStream {
		return w.sendJS(ctx, nn, m)
	}
	reply, err := w.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, w.requestError(ctx, nn, m.Subject, err)
	}
	if ack, ok := asPubAck(reply); ok {
		if err := w.checkPubAck(ctx, nn, m.Subject, ack); err != nil {
			return nil, err
		}
	}
	return decodeReply(reply.Header, reply.Data)
}

// ackCheckTimeout bounds the JetStream API lookup that tells a publish
// acknowledgement from a module's reply of the same shape.
const ackCheckTimeout = 5 * time.Second

// checkPubAck decides whether a core reply shaped like a publish
// acknowledgement of stream ack.Stream really is one, by asking the
// JetStream API whether that stream exists and captures subject. It returns
// nil when it is not (the reply is the module's result), the permanent
// CodeWrongMode error when it is, and a retryable unavailable error when
// the JetStream API cannot tell (it did not answer in time, or this
// connection may not ask it). Only replies asPubAck picked out come here, so
// the normal path pays nothing.
func (w *Wire) checkPubAck(ctx context.Context, nn switchboard.NodeName, subject string, ack pubAck) error {
	cctx, cancel := context.WithTimeout(ctx, ackCheckTimeout)
	defer cancel()
	var info *jetstream.StreamInfo
	js, err := w.jsAPI(ack.Domain)
	if err == nil {
		var s jetstream.Stream
		if s, err = js.Stream(cctx, ack.Stream); err == nil {
			info = s.CachedInfo()
		}
	}
	switch ackVerdict(subject, info, err) {
	case notAnAck:
		return nil
	case isAnAck:
		return router.Permanent(CodeWrongMode, fmt.Sprintf("%s belongs to JetStream stream %q (a publish acknowledgement came back, not a reply): the fleet runs the JetStream wire; set TINY_NATS_TRANSPORT=jetstream", subject, ack.Stream))
	}
	if ctx.Err() != nil {
		return w.requestError(ctx, nn, subject, ctx.Err())
	}
	why := fmt.Sprint(err)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		why = fmt.Sprintf("no answer in %v", ackCheckTimeout)
	}
	return router.Transient(router.CodeUnavailable, fmt.Sprintf("the reply from %s has the shape of a JetStream publish acknowledgement (stream %q), and asking the JetStream API whether that stream captures the subject failed: %s", subject, ack.Stream, why))
}

// jsAPI returns a JetStream API handle for domain ("": this account's own
// JetStream). It is made per call: building one costs no round trip, and
// checkPubAck, on the core wire, is the only user.
func (w *Wire) jsAPI(domain string) (jetstream.JetStream, error) {
	if domain == "" {
		return jetstream.New(w.nc)
	}
	return jetstream.NewWithDomain(w.nc, domain)
}

// verdict is what the JetStream API says of a reply shaped like a publish
// acknowledgement.
type verdict int

const (
	cannotTell verdict = iota
	notAnAck
	isAnAck
)

// ackVerdict judges a reply to a core request on subject that has the shape
// of a publish acknowledgement of some stream, from the JetStream API's
// answer about that stream (its info, or the lookup's error). It is an
// acknowledgement only if the stream exists and captures subject; it is
// not if the stream does not exist, does not capture subject, or there is
// no JetStream to have sent it. Any other failure of the lookup leaves it
// undecided.
func ackVerdict(subject string, info *jetstream.StreamInfo, err error) verdict {
	if err == nil {
		if info == nil {
			return cannotTell
		}
		for _, f := range info.Config.Subjects {
			if subjectCaptured(f, subject) {
				return isAnAck
			}
		}
		return notAnAck
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders): // no JetStream API: nothing could have acknowledged
		return notAnAck
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamNotFound, jetstream.JSErrCodeJetStreamNotEnabled, jetstream.JSErrCodeJetStreamNotEnabledForAccount:
			return notAnAck
		}
	}
	return cannotTell
}

// subjectCaptured reports whether the literal subject matches filter, a
// stream subject that may hold wildcards: '*' stands for one token, a final
// '>' for one or more.
func subjectCaptured(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		st, srest, smore := strings.Cut(subject, ".")
		if ft == ">" && !fmore {
			return st != ""
		}
		if ft != "*" && ft != st || ft == "*" && st == "" {
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

// request builds the NATS message of msg for subject, headers as the SDK
// writes them.
func (w *Wire) request(subject string, msg *router.Message) (*nats.Msg, error) {
	h := make(nats.Header, 8)
	h.Set(HeaderFrom, headerValue(msg.From))
	h.Set(HeaderTo, headerValue(msg.To))
	h.Set(HeaderEdgeID, headerValue(msg.EdgeID))
	if w.opts.Mode == Core {
		h.Set(HeaderMsgID, headerValue(msg.EdgeID))
	}
	if msg.Depth > 0 {
		h.Set(HeaderDepth, strconv.Itoa(msg.Depth))
	}
	if msg.ID != "" {
		h.Set(HeaderMessageID, headerValue(msg.ID))
	}
	for k, v := range msg.Metadata {
		if !validHeaderKey(k) {
			return nil, router.Permanent(router.CodeInvalidArgument, fmt.Sprintf("metadata key %q cannot travel in a NATS header (want letters, digits, '-', '_', '.')", k))
		}
		if isPassthrough(k) {
			h.Set(k, headerValue(v))
		} else {
			h.Set(MetaPrefix+k, headerValue(v))
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: msg.Payload}, nil
}

// requestError maps a failed core request to a *router.Error.
func (w *Wire) requestError(ctx context.Context, nn switchboard.NodeName, subject string, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return router.Transient(router.CodeModuleUnknown, fmt.Sprintf("no module %q listens on %s (not started yet, or gone)", nn.Module, subject))
	case errors.Is(err, context.Canceled) || ctx.Err() == context.Canceled:
		return &router.Error{Code: router.CodeCanceled, Message: fmt.Sprintf("request to %s: %v", subject, err)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || ctx.Err() == context.DeadlineExceeded:
		return router.Transient(router.CodeDeadlineExceeded, fmt.Sprintf("no reply from %s in time", subject))
	case errors.Is(err, nats.ErrConnectionClosed):
		return router.Permanent(router.CodeUnavailable, "nats connection is closed")
	case errors.Is(err, nats.ErrMaxPayload):
		return router.Permanent(router.CodeResourceExhausted, fmt.Sprintf("message to %s is larger than the broker's max_payload (%d bytes)", subject, w.nc.MaxPayload()))
	}
	return router.Transient(router.CodeUnavailable, fmt.Sprintf("request to %s: %v", subject, err))
}

// decodeReply turns a reply (core, or the JetStream wire's core reply) into
// the result: x-error → *router.Error (code from x-error-code, else
// remote_error; retryable only when x-error-retryable says so); x-empty or
// an empty body → nil; otherwise the body.
func decodeReply(h nats.Header, data []byte) ([]byte, error) {
	if e, code := h.Get(HeaderError), h.Get(HeaderErrorCode); e != "" || code != "" {
		retryable := parseBool(h.Get(HeaderErrorRetryable))
		if code == "" {
			code, retryable = CodeRemoteError, false
		}
		return nil, &router.Error{Code: code, Retryable: retryable, Message: e}
	}
	if h.Get(HeaderEmpty) == "1" || len(data) == 0 {
		return nil, nil
	}
	return data, nil
}

// replyHeader encodes a handler's outcome as reply headers: nil for a
// result with a body, x-empty for an empty result, x-error for a failure.
func replyHeader(out []byte, err error) nats.Header {
	if err != nil {
		e := router.AsError(err)
		code := e.Code
		if code == "" {
			code = router.CodeInternal
		}
		// x-error must be non-empty for the SDK to see a failure, and the
		// client trims header values: a blank text would arrive empty.
		msg := e.Message
		if strings.TrimSpace(headerValue(msg)) == "" {
			msg = code
		}
		if strings.TrimSpace(headerValue(msg)) == "" {
			msg = router.CodeInternal
		}
		return nats.Header{
			HeaderError:          {textcut.Fit(headerValue(msg), maxErrorText)},
			HeaderErrorCode:      {headerValue(code)},
			HeaderErrorRetryable: {strconv.FormatBool(e.Retryable)},
		}
	}
	if len(out) == 0 {
		return nats.Header{HeaderEmpty: {"1"}}
	}
	return nil
}

// incoming rebuilds the router.Message of a request's headers and body.
func incoming(h nats.Header, data []byte) (*router.Message, error) {
	msg := &router.Message{
		ID:      h.Get(HeaderMessageID),
		From:    h.Get(HeaderFrom),
		To:      h.Get(HeaderTo),
		EdgeID:  h.Get(HeaderEdgeID),
		Payload: data,
	}
	if d := h.Get(HeaderDepth); d != "" {
		n, err := router.ParseDepth(d)
		if err != nil {
			return nil, err
		}
		msg.Depth = n
	}
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		var key string
		switch {
		case isPassthrough(k):
			key = k
		case strings.HasPrefix(k, MetaPrefix) && len(k) > len(MetaPrefix):
			key = k[len(MetaPrefix):]
		default:
			continue
		}
		if msg.Metadata == nil {
			msg.Metadata = map[string]string{}
		}
		msg.Metadata[key] = vs[0]
	}
	return msg, nil
}

// pubAck is a JetStream publish acknowledgement as it arrives on a core
// reply subject.
type pubAck struct {
	Stream    string          `json:"stream"`
	Seq       uint64          `json:"seq"`
	Duplicate bool            `json:"duplicate,omitempty"`
	Domain    string          `json:"domain,omitempty"`
	Value     string          `json:"val,omitempty"`
	Batch     string          `json:"batch,omitempty"`
	Count     int             `json:"count,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
}

// asPubAck reports whether a core reply has the shape of a JetStream
// publish acknowledgement: no headers, and a body that is exactly an
// acknowledgement object (only its fields) naming a stream — the broker
// names the stream in every acknowledgement, errors included — whose stream
// and domain names are ones a broker accepts. A module may reply with such
// a body too, so a match is only a candidate for checkPubAck, which asks
// the JetStream API.
func asPubAck(m *nats.Msg) (pubAck, bool) {
	var a pubAck
	if len(m.Header) != 0 || !bytes.HasPrefix(bytes.TrimSpace(m.Data), []byte("{")) {
		return a, false
	}
	dec := json.NewDecoder(bytes.NewReader(m.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil || dec.More() {
		return a, false
	}
	return a, validJSName(a.Stream, false) && (a.Domain == "" || validJSName(a.Domain, true))
}

// validJSName reports whether s is a name the broker accepts for a stream
// (or, domain set, for a JetStream domain): not empty, none of the
// characters it refuses. It mirrors nats-server's unexported
// isValidAssetName (streams) and isValidName (domains); nats.go exports none.
func validJSName(s string, domain bool) bool {
	bad := " \t\r\n\f.*>/\\"
	if domain {
		bad = " \t\r\n\f.*>"
	}
	return s != "" && !strings.ContainsAny(s, bad)
}

// maxErrorText bounds the x-error text of a reply: an error message as
// long as the broker's max_payload would make the reply undeliverable.
const maxErrorText = 4096

// headerValue makes s safe for a NATS header value: CR and LF (which would
// end the header) become spaces.
func headerValue(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}

// validHeaderKey accepts the metadata keys that are safe NATS header names.
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkToken validates a subject token or stream-name part given in
// Options.
func checkToken(field, s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == '.' || c == '*' || c == '>' || c > 0x7e {
			return &switchboard.FieldError{Field: field, Value: s, Reason: "must be one subject token without spaces, '.', '*' or '>'"}
		}
	}
	return nil
}

// parseBool reads the retryable flag leniently ("true", "1", "yes").
func parseBool(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "t":
		return true
	}
	return false
}
