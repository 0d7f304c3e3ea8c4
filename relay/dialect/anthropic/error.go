package anthropic

import (
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// Error is Anthropic's error object. Its SDKs pick the exception by the
// HTTP status, and its type is one of a closed set that follows the
// status (ErrorType).
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ErrorBody is Anthropic's error body, and the data of a stream's error
// event: {"type":"error","error":{"type","message"}}.
type ErrorBody struct {
	Type  string `json:"type"`
	Error Error  `json:"error"`
}

// ErrorOf is the error object that tells a client of e. The relay's and
// the providers' codes are not Anthropic's, so only the status carries
// over; the message keeps what the code said.
func ErrorOf(e *wire.Error) Error {
	return Error{Type: ErrorType(e.Status), Message: e.Message}
}

// Body is the error body that carries e.
func (e Error) Body() ErrorBody { return ErrorBody{Type: "error", Error: e} }

// Anthropic's status for "overloaded": its SDKs retry it, as a 503.
const statusOverloaded = 529

// ErrorType is the type Anthropic gives an error of an HTTP status;
// api_error for a status it has no type for, or none.
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusGone, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "overloaded_error"
	}
	return "api_error"
}
