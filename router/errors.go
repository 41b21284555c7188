package router

import (
	"context"
	"errors"
	"slices"
)

// Error codes set by Switchboard itself. Handlers may use any other code
// token; codes travel unchanged on every wire.
const (
	// CodeUnavailable: the destination could not be reached (connection
	// refused, module down). Retryable, except when the sender's own wire
	// is closed (a closed pool, NATS connection or wire), which no retry
	// mends.
	CodeUnavailable = "unavailable"
	// CodeModuleUnknown: no address is known for the destination module
	// (not yet discovered, or gone). Retryable: discovery may catch up.
	CodeModuleUnknown = "module_unknown"
	// CodeNotDialable: the module is known only at addresses the wire cannot
	// use (a nats:// subject on the gRPC wire). Not retryable.
	CodeNotDialable = "not_dialable"
	// CodeInvalidName: the destination is not a valid full node name. Not
	// retryable.
	CodeInvalidName = "invalid_name"
	// CodeDepthExceeded: the message went through more than MaxDepth hops
	// (loop protection). Not retryable.
	CodeDepthExceeded = "depth_exceeded"
	// CodeNoHandler: the destination module has no handler for the node.
	// Not retryable.
	CodeNoHandler = "no_handler"
	// CodeMisrouted: the message reached a process that does not serve the
	// destination module (a stale address). Retryable.
	CodeMisrouted = "misrouted"
	// CodeDeadlineExceeded: the attempt ran out of time. Retryable.
	CodeDeadlineExceeded = "deadline_exceeded"
	// CodeCanceled: the caller gave up. Not retryable.
	CodeCanceled = "canceled"
	// CodeRemoteError: a remote module's handler failed and its wire reply
	// carried no Switchboard error code, as a TinySystems SDK peer replies
	// (gRPC status Unknown with the error's text). Not retryable: the SDK
	// never retries such an error either, and the handler did run.
	CodeRemoteError = "remote_error"
	// CodeResourceExhausted: the message was refused for its size or a
	// peer's resource limit (gRPC ResourceExhausted). Not retryable: the
	// same message fails the same way.
	CodeResourceExhausted = "resource_exhausted"
	// CodeInvalidArgument: a message or request a wire cannot carry or a
	// peer refuses as malformed (a string field that is not valid UTF-8 on
	// gRPC, a metadata key a NATS header cannot hold, a malformed
	// x-message-depth). Not retryable: the same message fails the same way.
	CodeInvalidArgument = "invalid_argument"
	// CodeInternal: a failure without a code of its own, such as a plain
	// Go error returned by a handler. Retryable (an edge only retries when
	// its policy asks for it).
	CodeInternal = "internal"
)

// Error is a routing or handler failure with a code and a retryable flag. It
// is independent of any transport: every wire (gRPC, NATS) carries Code,
// Retryable and Message and rebuilds an *Error on the caller's side, so
// errors.As works across hops and retry policies can act on remote failures.
type Error struct {
	// Code is a short token ("unavailable", "module_unknown", or one of the
	// handler's own).
	Code string
	// Retryable says whether trying again may succeed.
	Retryable bool
	// Message is the human-readable description.
	Message string
}

// Error returns "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is reports whether target is an *Error with the same code, so
// errors.Is(err, &router.Error{Code: "x"}) matches on code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// NewError returns an error with the given code and retryability.
func NewError(code string, retryable bool, msg string) *Error {
	return &Error{Code: code, Retryable: retryable, Message: msg}
}

// Permanent returns a non-retryable error with the given code.
func Permanent(code, msg string) *Error { return NewError(code, false, msg) }

// NoMessage is the error of a send or dispatch given a nil *Message, which
// has no destination: permanent, CodeInvalidName. The router and every wire
// return it instead of panicking.
func NoMessage() *Error {
	return Permanent(CodeInvalidName, "no message (a nil *router.Message has no destination)")
}

// Transient returns a retryable error with the given code.
func Transient(code, msg string) *Error { return NewError(code, true, msg) }

// AsError returns err as an *Error: itself when it is (or wraps) one, a
// canceled or deadline error for the context errors, and CodeInternal
// (retryable) for anything else. It returns nil for nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCanceled, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeDeadlineExceeded, Retryable: true, Message: err.Error()}
	}
	return &Error{Code: CodeInternal, Retryable: true, Message: err.Error()}
}

// shouldRetry reports whether a policy may try again after err.
func (p RetryPolicy) shouldRetry(err *Error) bool {
	if !err.Retryable {
		return false
	}
	return !slices.Contains(p.NonRetryableErrorCodes, err.Code)
}
