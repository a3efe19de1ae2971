package edge

import (
	"errors"
	"strconv"

	"github.com/mayfly/mayfly/ratelimit"
	"github.com/mayfly/mayfly/storage"
	"github.com/valyala/fasthttp"
)

// apiError is an error the client sees: a status, a stable code, a message
// that reveals nothing internal, optional details and an optional Retry-After.
type apiError struct {
	status     int
	code       string
	message    string
	details    map[string]any
	retryAfter int // seconds; 0: no header
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// with returns a copy of e carrying details.
func (e *apiError) with(details map[string]any) *apiError {
	c := *e
	c.details = details
	return &c
}

// The error codes of the API. docs/api.md's error table lists them; clients
// branch on code, so a code never changes meaning.
var (
	errInvalidJSON        = &apiError{status: 400, code: "INVALID_JSON", message: "The request body must be one JSON object."}
	errUnknownField       = &apiError{status: 400, code: "UNKNOWN_FIELD", message: "The request body has a field this endpoint does not accept."}
	errInvalidField       = &apiError{status: 400, code: "INVALID_FIELD", message: "A field is missing, of the wrong type or out of range."}
	errInvalidUUID        = &apiError{status: 400, code: "INVALID_UUID", message: "The identifier in the path is not a UUID."}
	errInvalidPagination  = &apiError{status: 400, code: "INVALID_PAGINATION", message: "limit must be an integer from 1 to 100 and offset an integer of at least 0."}
	errMalformed          = &apiError{status: 400, code: "MALFORMED_REQUEST", message: "The request is not valid HTTP/1.1 this server accepts."}
	errHeadersTooLarge    = &apiError{status: 431, code: "HEADERS_TOO_LARGE", message: "The request headers are too large."}
	errBodyTooLarge       = &apiError{status: 413, code: "BODY_TOO_LARGE", message: "The request body is too large."}
	errSessionRequired    = &apiError{status: 401, code: "MAILBOX_SESSION_REQUIRED", message: "Select a mailbox first: this endpoint needs the service_session cookie."}
	errSessionInvalid     = &apiError{status: 401, code: "MAILBOX_SESSION_INVALID", message: "The mailbox session is invalid, expired or destroyed."}
	errCredentialMissing  = &apiError{status: 401, code: "MAILBOX_CREDENTIAL_REQUIRED", message: "Selecting a mailbox needs the cookie issued when it was created."}
	errCredentialInvalid  = &apiError{status: 401, code: "MAILBOX_CREDENTIAL_INVALID", message: "The mailbox cookie does not match this mailbox."}
	errMailboxNotFound    = &apiError{status: 404, code: "MAILBOX_NOT_FOUND", message: "The mailbox does not exist, expired or was deleted."}
	errMessageNotFound    = &apiError{status: 404, code: "MESSAGE_NOT_FOUND", message: "The message does not exist in the current mailbox."}
	errRouteNotFound      = &apiError{status: 404, code: "ROUTE_NOT_FOUND", message: "No such endpoint."}
	errOutsideV1          = &apiError{status: 404, code: "ROUTE_NOT_FOUND", message: "No such endpoint: the API is under /v1."} // message completed by outsideV1
	errMethodNotAllowed   = &apiError{status: 405, code: "METHOD_NOT_ALLOWED", message: "This endpoint does not support the method."}
	errRateLimited        = &apiError{status: 429, code: "RATE_LIMITED", message: "Too many requests from this address; retry after a second.", retryAfter: 1}
	errCreationLimited    = &apiError{status: 429, code: "CREATION_RATE_LIMITED", message: "Too many mailboxes created from this address; wait for the window to reset."}
	errActiveLimit        = &apiError{status: 429, code: "ACTIVE_INBOX_LIMIT", message: "This address has the maximum number of live mailboxes; delete one or wait for one to expire."}
	errNetCreationLimited = &apiError{status: 429, code: "CREATION_RATE_LIMITED", message: "Too many mailboxes created from this network (IPv4 /24, IPv6 /48); wait for the window to reset."}
	errNetActiveLimit     = &apiError{status: 429, code: "ACTIVE_INBOX_LIMIT", message: "This network (IPv4 /24, IPv6 /48) has the maximum number of live mailboxes; delete one or wait for one to expire."}
	errGlobalLimit        = &apiError{status: 429, code: "GLOBAL_CREATION_LIMIT", message: "The service is creating too many mailboxes right now; retry in a minute."}
	errInternal           = &apiError{status: 500, code: "INTERNAL", message: "Temporary server failure; retry with backoff."}
	errUnavailable        = &apiError{status: 503, code: "DEPENDENCY_UNAVAILABLE", message: "Temporary dependency failure; retry with backoff.", retryAfter: 1}
	errProtection         = &apiError{status: 503, code: "REQUEST_PROTECTION", message: "The server is busy; retry after a second.", retryAfter: 1}
)

// toAPIError maps any error to what the client sees. It is the one table from
// the errors of storage and ratelimit to HTTP.
func toAPIError(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, storage.ErrSessionInvalid):
		return errSessionInvalid
	case errors.Is(err, storage.ErrCredentialInvalid):
		return errCredentialInvalid
	case errors.Is(err, storage.ErrMailboxNotFound):
		return errMailboxNotFound
	case errors.Is(err, storage.ErrMessageNotFound):
		return errMessageNotFound
	case errors.Is(err, storage.ErrUnavailable), errors.Is(err, ratelimit.ErrUnavailable):
		return errUnavailable
	}
	return errInternal
}

// decisionError is the error of a rate-limit decision that refused.
func decisionError(d ratelimit.Decision) *apiError {
	switch d.Kind {
	case ratelimit.KindRequest:
		return errRateLimited
	case ratelimit.KindCreation, ratelimit.KindNetCreation:
		e := *errCreationLimited
		if d.Kind == ratelimit.KindNetCreation {
			e = *errNetCreationLimited
		}
		e.retryAfter = int((d.RetryAfter + 999_999_999) / 1_000_000_000) // round up to whole seconds
		if d.Window != "" {
			// Which window is full: a client can tell its user to wait a
			// minute or to share one inbox for the day (docs/api.md).
			e.details = map[string]any{"window": d.Window}
		}
		return &e
	case ratelimit.KindActive:
		return errActiveLimit
	case ratelimit.KindNetActive:
		return errNetActiveLimit
	case ratelimit.KindGlobal:
		return errGlobalLimit
	}
	return errInternal
}

type errorBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details,omitempty"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// writeError writes e as the error envelope.
func writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.Details = e.code, e.message, e.details
	b.RequestID = requestID(ctx)
	if e.retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(ctx, e.status, &b)
}
