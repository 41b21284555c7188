package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/switchboard-io/switchboard"
)

// apiError is an error with its HTTP status and body, made by handlers for
// what is not a catalog error (a bad query parameter, a missing secret).
type apiError struct {
	status int
	body   ErrorBody
	retry  string // Retry-After, in seconds ("" for none)
}

func (e *apiError) Error() string { return e.body.Error }

func badRequest(field, msg string) error {
	return &apiError{status: http.StatusBadRequest, body: ErrorBody{Error: msg, Field: field, Code: CodeInvalid}}
}

// tooMany is a quota reached: 429 with Retry-After, the quota's name (its
// setting in the [http] section) and its limit.
func tooMany(quota string, limit int64, msg string) error {
	return &apiError{status: http.StatusTooManyRequests, body: ErrorBody{Error: msg, Code: CodeTooMany, Quota: quota, Limit: limit},
		retry: quotaRetryAfter}
}

// quotaRetryAfter is the Retry-After of a quota reached, in seconds: rows
// and streams go away at the pace of TTLs and reconnections.
const quotaRetryAfter = "10"

func unauthorized(msg string) error {
	return &apiError{status: http.StatusUnauthorized, body: ErrorBody{Error: msg, Code: CodeUnauthorized}}
}

func forbidden(msg string) error {
	return &apiError{status: http.StatusForbidden, body: ErrorBody{Error: msg, Code: CodeForbidden}}
}

// catalogErrors are the catalog's sentinel errors with their status and
// code, most specific first (ErrInvalidName and ErrInvalidAddress are also
// ErrInvalid).
var catalogErrors = []struct {
	err    error
	status int
	code   string
}{
	{switchboard.ErrInvalidName, http.StatusBadRequest, CodeInvalidName},
	{switchboard.ErrInvalidAddress, http.StatusBadRequest, CodeInvalidAddress},
	{switchboard.ErrInvalid, http.StatusBadRequest, CodeInvalid},
	{switchboard.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{switchboard.ErrLeaseHeld, http.StatusConflict, CodeLeaseHeld},
	{switchboard.ErrLeaseLost, http.StatusConflict, CodeLeaseLost},
	// Both are 503 like an unreachable catalog, with codes of their own: no
	// catalog needs an operator (or, on PostgreSQL, the next registration),
	// busy is worth retrying (writeError adds Retry-After).
	{switchboard.ErrNoCatalog, http.StatusServiceUnavailable, CodeNoCatalog},
	{switchboard.ErrBusy, http.StatusServiceUnavailable, CodeBusy},
}

// busyRetryAfter is the Retry-After of a busy answer, in seconds: the
// catalog's writer already waited its whole busy timeout for the lock.
const busyRetryAfter = "2"

// classify maps an error to its status and body. Catalog errors keep their
// message (they never contain secrets: secrets are not passed to the
// catalog); anything unknown is the catalog being unreachable.
func classify(err error) (int, ErrorBody) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ae.body
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge, ErrorBody{Error: "request body larger than 1 MiB", Code: CodeTooLarge}
	}
	body := ErrorBody{Error: err.Error()}
	var fe *switchboard.FieldError
	if errors.As(err, &fe) {
		// The field's own text: a backend's wrapping adds only its name
		// and may repeat the whole value.
		body.Error, body.Field, body.Reason = fe.Error(), fe.Field, fe.Reason
		body.Value = strings.ToValidUTF8(fe.Value[:min(len(fe.Value), 256)], "")
	}
	for _, k := range catalogErrors {
		if errors.Is(err, k.err) {
			body.Code = k.code
			return k.status, body
		}
	}
	if errors.Is(err, context.Canceled) {
		// The client went away; the status is never read.
		body.Code = CodeUnavailable
		return http.StatusServiceUnavailable, body
	}
	body.Code = CodeUnavailable
	body.Error = "catalog unavailable: " + err.Error()
	return http.StatusServiceUnavailable, body
}

// catalogDown is a 503 saying msg, for an endpoint that found the catalog
// unable to serve because of cause: its code is classify's for cause when
// that is a 503 (no_catalog, busy: writeError adds busy's Retry-After),
// else unavailable (cause nil, unknown, or an error classify answers with
// another status: the catalog still failed).
func catalogDown(msg string, cause error) error {
	code := CodeUnavailable
	if cause != nil {
		if status, body := classify(cause); status == http.StatusServiceUnavailable {
			code = body.Code
		}
	}
	return &apiError{status: http.StatusServiceUnavailable, body: ErrorBody{Error: msg, Code: code}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed","code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) int {
	status, body := classify(err)
	switch {
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	case body.Code == CodeBusy:
		w.Header().Set("Retry-After", busyRetryAfter)
	}
	var ae *apiError
	if errors.As(err, &ae) && ae.retry != "" {
		w.Header().Set("Retry-After", ae.retry)
	}
	writeJSON(w, status, body)
	return status
}
