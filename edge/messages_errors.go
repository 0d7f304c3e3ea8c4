package edge

import (
	"net/http"
	"strings"

	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/wire"
)

// # Errors in Anthropic's shape
//
// Anthropic's SDKs read an error as {"type":"error","error":{"type",
// "message"}} and pick the exception by the HTTP status; the error's type
// is one of a closed set that follows the status (anthropic.ErrorType).
// Every path under /v1/messages answers in that shape: the edge's own
// errors are written in many places (authentication, admission, the
// draining edge, the handlers shared with chat completions), so rather
// than passing a dialect to each, withDialect marks the ResponseWriter of
// such a request and writeError (errors.go) asks the writer which shape
// to write.

// anthropicWriter marks the response of a request in the Anthropic
// dialect; it passes everything on, and the ResponseController's methods
// through Unwrap.
type anthropicWriter struct{ http.ResponseWriter }

func (a anthropicWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// messagesPath is the prefix of the Anthropic Messages API's paths.
const messagesPath = "/v1/messages"

// isMessagesPath reports whether path is /v1/messages or below it.
func isMessagesPath(path string) bool {
	rest, ok := strings.CutPrefix(path, messagesPath)
	return ok && (rest == "" || rest[0] == '/')
}

// withDialect marks the responses of the Anthropic Messages API's paths.
func withDialect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isMessagesPath(r.URL.Path) {
			w = anthropicWriter{w}
		}
		next.ServeHTTP(w, r)
	})
}

// speaksAnthropic reports whether w, or a writer it wraps, is marked by
// withDialect.
func speaksAnthropic(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case anthropicWriter:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

// writeAnthropicError answers with e in Anthropic's shape, with e's status.
func writeAnthropicError(w http.ResponseWriter, e *wire.Error) {
	writeJSON(w, statusOf(e, http.StatusInternalServerError), anthropic.ErrorOf(e).Body())
}
