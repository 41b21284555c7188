package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/switchboard-io/switchboard"
	"github.com/switchboard-io/switchboard/httpapi/schema"
)

// Errors of the server's authorisation and availability, for errors.Is.
//
// ErrUnavailable marks what a retry may cure: the server said its catalog
// is unavailable (code "unavailable"), busy ("busy": also
// switchboard.ErrBusy) or without its tables ("no_catalog": also
// switchboard.ErrNoCatalog, which the next registration or heartbeat
// creates again), it did not answer within Config.RequestTimeout, or it
// could not be reached at all (also switchboard.ErrUnreachable: refused,
// reset or failed connections, unknown hosts; not a TLS or certificate
// failure, which no retry cures).
var (
	ErrUnauthorized = errors.New("unauthorized (missing API token or instance secret)")
	ErrForbidden    = errors.New("forbidden (wrong API token or instance secret)")
	ErrUnavailable  = errors.New("catalog unavailable")
	// ErrTooMany is a quota of the server reached (429): its instances,
	// leases or watch streams, in all or of the caller's token (the
	// APIError's Quota and Limit say which). It is also ErrUnavailable:
	// retry later.
	ErrTooMany = errors.New("a quota of the server is reached")
)

// APIError is an error response of the server.
type APIError struct {
	Status int
	schema.ErrorBody
}

func (e *APIError) Error() string { return e.ErrorBody.Error }

// Is maps the server's error codes to the switchboard sentinels, so callers
// branch on errors.Is(err, switchboard.ErrNotFound) as with any backend.
func (e *APIError) Is(target error) bool {
	switch e.Code {
	case schema.CodeInvalidName:
		return target == switchboard.ErrInvalidName || target == switchboard.ErrInvalid
	case schema.CodeInvalidAddress:
		return target == switchboard.ErrInvalidAddress || target == switchboard.ErrInvalid
	case schema.CodeInvalid, schema.CodeTooLarge:
		return target == switchboard.ErrInvalid
	case schema.CodeNotFound:
		return target == switchboard.ErrNotFound
	case schema.CodeLeaseHeld:
		return target == switchboard.ErrLeaseHeld
	case schema.CodeLeaseLost:
		return target == switchboard.ErrLeaseLost
	case schema.CodeUnauthorized:
		return target == ErrUnauthorized
	case schema.CodeForbidden:
		return target == ErrForbidden
	case schema.CodeUnavailable:
		return target == ErrUnavailable
	case schema.CodeBusy:
		// The write did not happen; as with every backend's ErrBusy, a
		// retry may succeed.
		return target == switchboard.ErrBusy || target == ErrUnavailable
	case schema.CodeTooMany:
		return target == ErrTooMany || target == ErrUnavailable
	case schema.CodeNoCatalog:
		// The catalog's tables are gone; the next registration or
		// heartbeat (of a handle that may create them) creates them again.
		return target == switchboard.ErrNoCatalog || target == ErrUnavailable
	}
	return false
}

// As gives the caller a *switchboard.FieldError for an invalid request
// whose field the server named, wrapping the sentinel of its code (as
// every backend's validation errors do).
func (e *APIError) As(target any) bool {
	fe, ok := target.(**switchboard.FieldError)
	if !ok || e.Field == "" {
		return false
	}
	var kind error
	switch e.Code {
	case schema.CodeInvalid:
		kind = switchboard.ErrInvalid
	case schema.CodeInvalidName:
		kind = switchboard.ErrInvalidName
	case schema.CodeInvalidAddress:
		kind = switchboard.ErrInvalidAddress
	default:
		return false
	}
	reason := e.Reason
	if reason == "" {
		reason = e.ErrorBody.Error
	}
	*fe = switchboard.NewFieldError(kind, e.Field, e.Value, reason)
	return true
}

// olderServer turns a server's refusal of a field of body it does not
// know (a release older than the field; this client sends such a field
// only when the caller set it) into an error that says so and names the
// server's release, asked from /v1/info: the caller learns to upgrade the
// server, or to leave the field unset, instead of hunting a typo. Any
// other error is returned as it is.
func (c *Client) olderServer(ctx context.Context, err error, body map[string]json.RawMessage) error {
	var e *APIError
	if !errors.As(err, &e) || e.Code != schema.CodeInvalid || e.Field == "" ||
		!strings.HasPrefix(e.ErrorBody.Error, "unknown field ") {
		return err
	}
	sent, ok := body[e.Field]
	if !ok {
		return err
	}
	release := "a release older than this client that does not report its version"
	if info, _, ierr := c.info(ctx); ierr == nil && info.Version != "" {
		release = info.Version
	}
	value := string(sent) // a number or an object as sent; a string without its quotes
	var str string
	if json.Unmarshal(sent, &str) == nil {
		value = str
	}
	return switchboard.NewFieldError(switchboard.ErrInvalid, e.Field, value,
		fmt.Sprintf("the server does not know this field: it runs %s; upgrade the server, or leave %s unset", release, e.Field))
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(b, &e.ErrorBody) != nil || e.ErrorBody.Error == "" {
		e.ErrorBody = schema.ErrorBody{Error: fmt.Sprintf("switchboard server: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b)), Code: statusCode(resp.StatusCode)}
	}
	return e
}

// statusCode is the error code of a response without the server's JSON
// body (one from a proxy in front of it, for example): a refused token is
// ErrUnauthorized or ErrForbidden, as from the server itself, not an
// unavailable catalog; anything else is unavailable (a 404 there means no
// switchboard server, not a missing instance).
func statusCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return schema.CodeUnauthorized
	case http.StatusForbidden:
		return schema.CodeForbidden
	case http.StatusRequestEntityTooLarge:
		return schema.CodeTooLarge
	case http.StatusTooManyRequests:
		return schema.CodeTooMany
	}
	return schema.CodeUnavailable
}

// unreachableError is a request that never got an answer from the server
// (the connection was refused, reset or could not be made): the server is
// down or unreachable, which a retry may cure. It is
// switchboard.ErrUnreachable and ErrUnavailable, and wraps the transport's
// error.
type unreachableError struct {
	base string
	err  error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("switchboard server %s: %v: %v", e.base, switchboard.ErrUnreachable, e.err)
}

func (e *unreachableError) Unwrap() []error {
	return []error{switchboard.ErrUnreachable, ErrUnavailable, e.err}
}

// transportError is the error of a request to base whose transport
// failed with err under ctx: unreachable when the connection could not be
// made or was lost (see unreachable); anything else — the caller's own end
// (its cancel or deadline, or the request timeout, which the caller turns
// into its own error), a certificate or TLS failure, an https:// DSN for
// a plain HTTP server — as it is, which no retry cures.
func transportError(ctx context.Context, base string, err error) error {
	if ctx.Err() != nil || !unreachable(err) {
		return fmt.Errorf("switchboard server %s: %w", base, err)
	}
	return &unreachableError{base: base, err: err}
}

// unreachable reports whether err says the server could not be reached or
// the connection to it was lost: a refused, reset or failed connection
// (dial, read or write), a name that did not resolve, a connection closed
// before the answer. A TLS alert, a certificate the client does not trust
// and a protocol mismatch are not: they are the same at every retry. A
// refused or reset connection needs no clause of its own: net's dialer and
// connections return the errno inside a *net.OpError, which the transport
// keeps in its error over HTTP/1.1 and HTTP/2 alike
// (TestRefusedAndResetAreOpErrors).
func unreachable(err error) bool {
	var (
		alert    tls.AlertError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if errors.As(err, &alert) || errors.As(err, &verify) || errors.As(err, &header) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
