package wire

// Error is an error in OpenAI's shape. It is what a client receives in an
// HTTP error body, in an SSE error event before [DONE], and in a WebSocket
// end message; Status is the HTTP status it maps to.
type Error struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	// Status is the HTTP status the error maps to; stored in frames so any
	// edge renders it the same, and left out of client JSON by the edge.
	Status int `json:"http_status,omitempty"`
	// RetryAfterMS is how long the client should wait before it tries
	// again (a 503 because every provider's breaker is open, a 429 of a
	// tenant limit); the edge sends it as Retry-After, in whole seconds
	// rounded up, and leaves it out of client JSON.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Error types used by the relay, following OpenAI's vocabulary where it has
// one.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeNotFound       = "not_found_error"
	TypeUpstream       = "upstream_error"
	TypeIncomplete     = "incomplete_stream"
	TypeCancelled      = "cancelled"
	TypeServer         = "server_error"
)
