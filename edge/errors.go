package edge

import (
	"fmt"
	"net/http"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// Error codes the edge puts in OpenAI error bodies. Clients branch on them,
// so they are part of the API.
const (
	CodeInvalidJSON      = chat.CodeInvalidJSON
	CodeInvalidValue     = chat.CodeInvalidValue
	CodeBodyTooLarge     = "body_too_large"
	CodeModelNotFound    = chat.CodeModelNotFound
	CodeInvalidStreamID  = "invalid_stream_id"
	CodeInvalidCursor    = "invalid_cursor"
	CodeStreamNotFound   = "stream_not_found"
	CodeCursorMismatch   = "cursor_mismatch"
	CodeCursorExpired    = "cursor_expired"
	CodeStreamActive     = "stream_active"
	CodeUnknownURL       = "unknown_url"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnavailable      = "unavailable"
	// CodeInterrupted ends a response the edge could not finish (it lost
	// the log): the client resumes from its last cursor.
	CodeInterrupted = "stream_interrupted"
	// CodeDraining ends responses and refuses requests while the edge shuts
	// down: the client reconnects (to another edge) and resumes from its
	// last cursor. The generation itself goes on.
	CodeDraining = "edge_draining"
)

// invalid is a 400 naming the parameter at fault (chat.Invalid).
func invalid(param, code, format string, args ...any) *wire.Error {
	return chat.Invalid(param, code, format, args...)
}

// modelNotFound is the 404 for a model (chat.ModelNotFound).
func modelNotFound(model string) *wire.Error { return chat.ModelNotFound(model) }

// notFound is the 404 for a stream that does not exist or has expired. A
// stream of another tenant gets it too, so that an error never reveals
// that someone else's stream exists.
func notFound(id, param string) *wire.Error {
	return &wire.Error{
		Message: "stream " + id + " does not exist or has expired",
		Type:    wire.TypeNotFound,
		Param:   param,
		Code:    CodeStreamNotFound,
		Status:  http.StatusNotFound,
	}
}

// unavailable is a 503 for a NATS call that failed, what (the step the
// edge was taking) with err: the request may succeed on a retry, here or
// on another edge. err is for the log (Cause), not for the client.
func unavailable(what string, err error) *wire.Error {
	return &wire.Error{
		Message: fmt.Sprintf("The relay's storage did not answer while %s; retry the request.", what),
		Type:    wire.TypeServer,
		Code:    CodeUnavailable,
		Status:  http.StatusServiceUnavailable,
		Cause:   err,
	}
}

// statusOf is the HTTP status an error maps to; fallback when it has none.
func statusOf(e *wire.Error, fallback int) int {
	if e.Status >= 400 && e.Status <= 599 {
		return e.Status
	}
	return fallback
}

// writeError answers with e as an OpenAI error body, or in Anthropic's
// shape on the Messages API's paths (messages_errors.go).
func writeError(w http.ResponseWriter, e *wire.Error) {
	setRetryAfter(w, e) // admit_cluster.go
	noteError(w, e)     // observe.go: a 4xx is logged with its reason
	if speaksAnthropic(w) {
		writeAnthropicError(w, e)
		return
	}
	writeJSON(w, statusOf(e, http.StatusInternalServerError), struct {
		Error chat.Error `json:"error"`
	}{chat.ErrorOf(e)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body := marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
