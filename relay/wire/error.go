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
	// Cause is the relay's own error behind Message, for the log of the
	// role that met it; it is neither stored nor shown to a client, whose
	// message says what failed for it.
	Cause error `json:"-"`
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

// Codes of an error that a limit of the relay put on a request, so that a
// client (and an operator reading it) knows which one ended the stream.
const (
	// CodeRetriesExhausted: the request's own retries ran out
	// (max_retries_per_model, retry.max_retries) on a failing provider.
	CodeRetriesExhausted = "retries_exhausted"
	// CodeRetryBudget: the worker's retry budget for the provider was spent.
	CodeRetryBudget = "retry_budget_exhausted"
	// CodeBreakerOpen: the provider's circuit breaker is open.
	CodeBreakerOpen = "circuit_breaker_open"
	// CodeProviderPaused: the provider asked the cluster to wait
	// (Retry-After).
	CodeProviderPaused = "provider_paused"
	// CodeProviderRateLimit: the provider's rate limit share is used up.
	CodeProviderRateLimit = "rate_limit_reached"
)
