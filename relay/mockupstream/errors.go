package mockupstream

import (
	"net/http"
	"strconv"
)

// errorBody builds an OpenAI-shaped error for status. The type and code
// follow what the real API sends for that status, so that a client's error
// classification is exercised as it would be in production.
func errorBody(status int, message string) apiError {
	e := apiError{Message: message, Type: "invalid_request_error"}
	switch {
	case status == http.StatusUnauthorized:
		e.Code = ptr("invalid_api_key")
	case status == http.StatusTooManyRequests:
		e.Type, e.Code = "requests", ptr("rate_limit_exceeded")
	case status >= 500:
		e.Type = "server_error"
	}
	return e
}

// writeError sends an error response. Errors are never streamed: even a
// streaming request gets a plain JSON body, as from the real API.
func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

// writeJSON sends v as a JSON response. A failed write means the client
// went away, and there is nobody left to tell.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func ptr[T any](v T) *T { return &v }

// overloaded is the message of an error_after fault's error event.
const overloaded = "mock-upstream: injected fault error_after: Overloaded"
