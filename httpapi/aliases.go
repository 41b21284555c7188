package httpapi

import "github.com/switchboard-io/switchboard/httpapi/schema"

// The API's JSON shapes, codes and headers live in package schema (shared
// with the remote client); these names are the same ones.
type (
	// ErrorBody is schema.ErrorBody.
	ErrorBody = schema.ErrorBody
	// RegisterResponse is schema.RegisterResponse.
	RegisterResponse = schema.RegisterResponse
	// HeartbeatRequest is schema.HeartbeatRequest.
	HeartbeatRequest = schema.HeartbeatRequest
	// HeartbeatItem is schema.HeartbeatItem.
	HeartbeatItem = schema.HeartbeatItem
	// HeartbeatResponse is schema.HeartbeatResponse.
	HeartbeatResponse = schema.HeartbeatResponse
	// RefusedItem is schema.RefusedItem.
	RefusedItem = schema.RefusedItem
	// ReapResponse is schema.ReapResponse.
	ReapResponse = schema.ReapResponse
	// NowResponse is schema.NowResponse.
	NowResponse = schema.NowResponse
	// LeaseJSON is schema.LeaseJSON.
	LeaseJSON = schema.LeaseJSON
	// LeaseRequest is schema.LeaseRequest.
	LeaseRequest = schema.LeaseRequest
	// Info is schema.Info.
	Info = schema.Info
	// SelfPreservation is schema.SelfPreservation.
	SelfPreservation = schema.SelfPreservation
)

// Error codes and headers: see package schema.
const (
	CodeInvalid          = schema.CodeInvalid
	CodeInvalidName      = schema.CodeInvalidName
	CodeInvalidAddress   = schema.CodeInvalidAddress
	CodeTooLarge         = schema.CodeTooLarge
	CodeUnauthorized     = schema.CodeUnauthorized
	CodeForbidden        = schema.CodeForbidden
	CodeNotFound         = schema.CodeNotFound
	CodeLeaseHeld        = schema.CodeLeaseHeld
	CodeLeaseLost        = schema.CodeLeaseLost
	CodeUnavailable      = schema.CodeUnavailable
	CodeMethod           = schema.CodeMethod
	CodeNoCatalog        = schema.CodeNoCatalog
	CodeBusy             = schema.CodeBusy
	CodeUnsupportedMedia = schema.CodeUnsupportedMedia
	CodeTooMany          = schema.CodeTooMany
	SecretHeader         = schema.SecretHeader
	LeaseSecretHeader    = schema.LeaseSecretHeader
	LeaseNextHeader      = schema.LeaseNextHeader
)
