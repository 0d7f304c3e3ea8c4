package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
)

// Sentinel errors. Errors returned by this package wrap them with the provider
// name and the detail, so callers test them with errors.Is.
var (
	// ErrMalformed means the provider sent bytes that are not a valid event
	// stream or chunk (chat.ErrMalformed, which the dialects' parsers
	// return). It is a provider fault, so Classify calls it Transient.
	ErrMalformed = chat.ErrMalformed

	// ErrTruncated means the stream ended, cleanly or by a broken connection,
	// before any chunk carried a finish_reason: the answer is incomplete.
	ErrTruncated = errors.New("stream ended without a finish reason")

	// ErrStalled means no byte arrived within Client.FirstByteTimeout or
	// Client.StallTimeout; the request was cancelled to free the connection.
	ErrStalled = errors.New("stream stalled")

	// ErrSilent is the ErrStalled of a call that got no byte at all within
	// Client.FirstByteTimeout: a provider that accepts connections and
	// never answers. A worker moves on along the route after one.
	ErrSilent = fmt.Errorf("%w before the first byte", ErrStalled)

	// ErrClosed is returned by Stream.Next after Stream.Close. Closing is the
	// caller's decision, so Classify calls it Canceled.
	ErrClosed = errors.New("stream closed")
)

// StatusError is returned by Client.Stream when the provider answers with a
// status outside 2xx. Nothing was streamed, so the request can be retried
// elsewhere without duplicating output.
type StatusError struct {
	// Provider is Target.Provider.
	Provider string
	// Status is the HTTP status code.
	Status int
	// Body holds at most the first 64 KiB of the response body.
	Body []byte
	// RetryAfter is the wait the provider asked for: the larger of the
	// Retry-After (seconds or HTTP date) and retry-after-ms headers, capped
	// at 24h. Zero means the provider gave no hint.
	RetryAfter time.Duration
	// Err is the body decoded as an OpenAI error; zero when the body has
	// another shape.
	Err chat.Error
}

func (e *StatusError) Error() string {
	msg := e.Err.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("upstream: %s: status %d: %s", e.Provider, e.Status, msg)
}
