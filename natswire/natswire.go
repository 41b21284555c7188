// Package natswire is the NATS wire between modules, byte-compatible
// with the TinySystems module SDK: core request/reply on
// tinymodule.<module>.msg (queue group = module) and .sysmsg (every replica),
// or the JetStream durable wire (stream module-edges, one durable consumer per
// module, replies over core NATS to the x-reply-inbox header).
//
// A *Wire implements router.Wire (Send) and serves a module (Serve), handing
// every incoming message to a router.Handler, usually a router's Dispatch.
// Failures cross the wire as x-error / x-error-code headers (what the SDK
// reads) plus x-error-retryable (Switchboard's flag, ignored by the SDK).
//
// Connect reaches a broker as production runs it: several servers of a
// cluster (reconnecting to any), credentials (a .creds file, an nkey seed,
// user and password, a token) and TLS with a private CA, a client
// certificate or handshake-first; Options.Replicas replicates the
// JetStream streams across a cluster. The package imports no broker;
// natswire/embedded runs one in process.
package natswire

import (
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/router"
)

// Headers of a request, as the SDK writes and reads them.
const (
	HeaderFrom       = "x-from"
	HeaderTo         = "x-to"
	HeaderEdgeID     = "x-edge-id"
	HeaderDepth      = "x-message-depth"
	HeaderMsgID      = "Nats-Msg-Id" // core requests only: the edge id (the SDK's choice)
	HeaderMode       = "x-mode"
	HeaderReplyInbox = "x-reply-inbox" // JetStream: where the receiver sends its reply
	HeaderTrace      = "traceparent"
	HeaderTraceState = "tracestate"
	// JetStream durable-run headers of the SDK: carried through Metadata.
	HeaderRunID         = "x-run-id"
	HeaderStepKey       = "x-step-key"
	HeaderReplySubject  = "x-reply-subject"
	HeaderReplyTarget   = "x-reply-target"
	HeaderReplyDeadline = "x-reply-deadline"
	// HeaderMessageID carries router.Message.ID (Switchboard only; the SDK
	// ignores it).
	HeaderMessageID = "x-message-id"
	// MetaPrefix prefixes the other router.Message.Metadata keys.
	MetaPrefix = "x-meta-"
)

// Headers of a reply.
const (
	HeaderError     = "x-error"
	HeaderErrorCode = "x-error-code"
	// HeaderErrorRetryable is Switchboard's retryable flag ("true"/"false");
	// SDK peers neither send nor read it.
	HeaderErrorRetryable = "x-error-retryable"
	HeaderEmpty          = "x-empty"
)

// passthrough are the metadata keys that travel as bare headers, because
// the SDK reads or writes them under exactly these names.
var passthrough = []string{HeaderTrace, HeaderTraceState, HeaderMode, HeaderRunID, HeaderStepKey,
	HeaderReplySubject, HeaderReplyTarget, HeaderReplyDeadline}

func isPassthrough(k string) bool {
	for _, p := range passthrough {
		if p == k {
			return true
		}
	}
	return false
}

// Defaults of the SDK.
const (
	DefaultPrefix         = "tinymodule"
	DefaultStream         = "module-edges"
	DefaultSysStream      = "module-sysmsgs"
	DefaultRequestTimeout = 5 * time.Minute
	DefaultAckWait        = 30 * time.Second
	DefaultInProgress     = 10 * time.Second
	DefaultMaxDeliver     = 3
	DefaultGracePeriod    = 10 * time.Second
	// DefaultHealthInterval is how often a JetStream receiver checks that
	// its consumer still exists (a broker that lost its store drops it
	// silently between pulls).
	DefaultHealthInterval = 5 * time.Second
)

// Error codes the NATS wire adds to router's.
const (
	// CodeRemoteError: a peer replied x-error without x-error-retryable
	// (an SDK module). Not retryable: the SDK never retries such errors.
	CodeRemoteError = router.CodeRemoteError
	// CodeWrongMode: a core request was answered by a JetStream publish
	// acknowledgement — the subject belongs to a stream, so the fleet runs
	// the JetStream wire. Not retryable. A reply merely shaped like an
	// acknowledgement (no headers, a body such as {"stream":"x","seq":1})
	// is only called one after the JetStream API confirms that the stream
	// it names exists and captures the subject; otherwise it is the
	// module's result.
	CodeWrongMode = "wrong_wire_mode"
	// CodeDuplicate: JetStream de-duplicated the request, so no receiver
	// will ever see it (and no reply will come). Not retryable as is.
	CodeDuplicate = "duplicate"
)

// Mode selects core request/reply or the JetStream durable wire.
type Mode int

const (
	// Core is NATS core request/reply.
	Core Mode = iota
	// JetStream is the durable wire: requests go through a work-queue
	// stream, replies come back over core NATS.
	JetStream
)

// ParseMode reads TINY_NATS_TRANSPORT: "jetstream" is JetStream, "" or
// "core" is Core; anything else is an error naming the accepted values.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "core":
		return Core, nil
	case "jetstream":
		return JetStream, nil
	}
	return Core, &switchboard.FieldError{Field: "nats_transport", Value: s, Reason: `want "core" (or empty) or "jetstream"`}
}

// String returns the startup log line's name of the mode.
func (m Mode) String() string {
	if m == JetStream {
		return "jetstream-backed durable wire"
	}
	return "core req/reply"
}

// Subject returns the business subject of module with the SDK's prefix:
// "tinymodule.<module>.msg".
func Subject(module string) string { return DefaultPrefix + "." + module + ".msg" }

// SysSubject returns the system subject of module:
// "tinymodule.<module>.sysmsg".
func SysSubject(module string) string { return DefaultPrefix + "." + module + ".sysmsg" }

// Address returns what a module on NATS advertises:
// "nats://tinymodule.<module>.msg".
func Address(module string) string { return "nats://" + Subject(module) }

// IsAddress reports whether addr is a nats:// address.
func IsAddress(addr string) bool { return strings.HasPrefix(addr, "nats://") }

// Options configure a Wire.
type Options struct {
	// Mode is Core (default) or JetStream.
	Mode Mode
	// Prefix is the first subject token (default "tinymodule"); tests
	// override it to stay apart from real modules.
	Prefix string
	// Stream and SysStream name the JetStream streams (defaults
	// "module-edges", "module-sysmsgs"); tests override them.
	Stream, SysStream string
	// RequestTimeout bounds a send whose context has no deadline (default
	// 5 minutes, the SDK's).
	RequestTimeout time.Duration
	// AckWait, InProgressInterval and MaxDeliver tune the JetStream
	// consumer (defaults 30 s, 10 s, 3).
	AckWait, InProgressInterval time.Duration
	MaxDeliver                  int
	// HealthInterval is how often a JetStream receiver checks its consumer
	// (default 5 s).
	HealthInterval time.Duration
	// Replicas is how many servers of a JetStream cluster keep each of the
	// streams the wire creates (default 1, the SDK's; at most 5). With 3,
	// the streams survive the loss of any one server. Stream names and
	// subjects do not change with it, so SDK modules still share them; a
	// stream that exists with another count is updated to this one.
	Replicas int
	// Instance names this replica for its own system-message consumer on
	// JetStream (default: a random token).
	Instance string
	// GracePeriod bounds how long Serve lets in-flight handlers finish
	// after its context ends (default 10 s); then their contexts end.
	GracePeriod time.Duration
	// Logger receives the wire's logs (nil: slog.Default()).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.SysStream == "" {
		o.SysStream = DefaultSysStream
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.InProgressInterval <= 0 {
		o.InProgressInterval = DefaultInProgress
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = DefaultHealthInterval
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}
