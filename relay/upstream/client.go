package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/tracing"
)

// Defaults for the zero Client.
const (
	// DefaultFirstByteTimeout is generous because reasoning models may think
	// for a long time before the first token, and not all providers send
	// keep-alive comments meanwhile.
	DefaultFirstByteTimeout = 2 * time.Minute
	// DefaultStallTimeout bounds the silence between two bytes of a stream
	// that has started.
	DefaultStallTimeout = time.Minute
	// DefaultContentStallTimeout bounds the time between two deltas with
	// content once the answer started, keep-alives or not.
	DefaultContentStallTimeout = 2 * time.Minute
)

// maxErrorBody bounds how much of a non-2xx body is kept in StatusError.
const maxErrorBody = 64 << 10

// Target is one provider endpoint.
type Target struct {
	// Provider names the provider in errors. Keep it a bounded name from
	// config, since callers use it as a metric label.
	Provider string
	// BaseURL is the API root, such as "https://api.openai.com/v1"; the
	// Dialect's endpoint ("/chat/completions", "/messages", "/responses")
	// is appended.
	BaseURL string
	// APIKey is sent as a bearer token (x-api-key for Anthropic); empty
	// sends none, for local servers that need none.
	APIKey string
	// Dialect is the API the provider speaks; zero means DialectChat.
	Dialect Dialect
	// Headers are sent with the call besides those of the dialect and the
	// key, which they never replace: the request's ids (provider
	// request_headers).
	Headers http.Header
	// HTTP2PriorKnowledge sends the calls to a plain http BaseURL over
	// HTTP/2 without TLS (h2c), where the server is known to speak it: many
	// streams then share one connection (provider http2_prior_knowledge).
	// Only a Transport acts on it; over https, ALPN decides.
	HTTP2PriorKnowledge bool
}

// Client calls providers' streaming chat completions. The zero value is
// ready to use. It is safe for concurrent use, and cheap to copy: to use
// other bounds for some calls, copy it and change the copy's fields.
type Client struct {
	// HTTPClient sends the requests; nil means http.DefaultClient. Its
	// Timeout must be zero, or it cuts long streams: the stall bounds below
	// are how a silent provider is detected.
	HTTPClient *http.Client

	// FirstByteTimeout bounds the wait from sending the request to the
	// first byte of the response body (headers alone do not count).
	// Zero means DefaultFirstByteTimeout; negative means no bound.
	FirstByteTimeout time.Duration

	// StallTimeout bounds the silence between two bytes once the body has
	// started. Any byte counts, keep-alive comments included.
	// Zero means DefaultStallTimeout; negative means no bound.
	StallTimeout time.Duration

	// ContentStallTimeout bounds the time between two deltas with content
	// (text, reasoning, a refusal, tool calls) once the first arrived:
	// keep-alive comments, pings and empty chunks keep a connection alive
	// but do not make an answer. Zero means DefaultContentStallTimeout;
	// negative means no bound.
	ContentStallTimeout time.Duration

	// MaxEventSize bounds one SSE line and one event's data.
	// Zero means DefaultMaxEventSize.
	MaxEventSize int
}

// NewClient returns a Client that sends with httpClient (nil means
// http.DefaultClient) and uses the default bounds.
func NewClient(httpClient *http.Client) *Client {
	return &Client{HTTPClient: httpClient}
}

// Stream posts body, a chat completion request with "stream": true, to
// t.BaseURL + "/chat/completions" and returns the open event stream. For
// another t.Dialect, body is translated to it first (an impossible
// translation wraps ErrUntranslatable), and the answer's events are read
// back as chat Deltas.
//
// A non-2xx answer is a *StatusError. A 2xx answer with a JSON body instead
// of an event stream is the provider's error (wrapping *chat.Error) or
// ErrMalformed. A silent provider fails with ErrStalled; see
// FirstByteTimeout. When ctx ends, the error wraps ctx.Err().
//
// ctx governs the whole stream, not just this call: cancelling it aborts
// Stream.Next. The caller must Close the returned Stream.
func (c *Client) Stream(ctx context.Context, t Target, body []byte) (*Stream, error) {
	body, dec, err := t.translate(body)
	if err != nil {
		return nil, fmt.Errorf("upstream: %s: %w: %w", t.Provider, ErrUntranslatable, err)
	}
	reqCtx, cancel := context.WithCancelCause(ctx)
	wd := startWatchdog(bound(c.FirstByteTimeout, DefaultFirstByteTimeout), bound(c.StallTimeout, DefaultStallTimeout),
		bound(c.ContentStallTimeout, DefaultContentStallTimeout), cancel)
	fail := func(err error) (*Stream, error) {
		wd.stop()
		cancel(nil)
		return nil, err
	}

	req, err := t.NewRequest(reqCtx, http.MethodPost, t.Dialect.endpoint(), bytes.NewReader(body))
	if err != nil {
		return fail(fmt.Errorf("upstream: %s: %w", t.Provider, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	t.setHeaders(req.Header)
	tracing.InjectHTTP(ctx, req.Header) // the provider continues the caller's trace

	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fail(fmt.Errorf("upstream: %s: %w", t.Provider, requestErr(reqCtx, err)))
	}
	rb := &activityReader{r: resp.Body, wd: wd}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{
			Provider:   t.Provider,
			Status:     resp.StatusCode,
			RetryAfter: retryAfter(resp.Header, time.Now()),
		}
		// A failed read still leaves the status, which is what matters.
		se.Body, _ = io.ReadAll(io.LimitReader(rb, maxErrorBody))
		se.Err, _ = chat.ParseErrorBody(se.Body)
		_ = resp.Body.Close()
		return fail(se)
	}

	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		b, _ := io.ReadAll(io.LimitReader(rb, maxErrorBody))
		_ = resp.Body.Close()
		if e, ok := chat.ParseErrorBody(b); ok {
			return fail(fmt.Errorf("upstream: %s: error response: %w", t.Provider, &e))
		}
		return fail(fmt.Errorf("upstream: %s: %w: JSON response instead of an event stream", t.Provider, ErrMalformed))
	}

	return &Stream{
		provider: t.Provider,
		ctx:      reqCtx,
		cancel:   cancel,
		wd:       wd,
		body:     resp.Body,
		events:   NewEventReader(rb, c.MaxEventSize),
		dec:      dec,
	}, nil
}

// CloseIdleConnections closes the connections to providers that no call is
// using. A stopping worker calls it, so it leaves no socket open behind it:
// a connection the transport dialed but never sent on would otherwise hold
// up the provider's graceful shutdown for its first five seconds.
func (c *Client) CloseIdleConnections() { c.httpClient().CloseIdleConnections() }

func (c *Client) httpClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// bound applies the zero-means-default, negative-means-off convention;
// the watchdog takes zero as off.
func bound(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return d
}

// requestErr explains an error that may have been caused by the end of the
// request context: the watchdog's ErrStalled, Close's ErrClosed, or the
// caller's ctx, whose Err (Canceled or DeadlineExceeded) is kept in the
// chain alongside any custom cause.
func requestErr(reqCtx context.Context, err error) error {
	if reqCtx.Err() == nil {
		return err
	}
	cause := context.Cause(reqCtx)
	if errors.Is(cause, ErrStalled) || errors.Is(cause, ErrClosed) || errors.Is(cause, reqCtx.Err()) {
		return cause
	}
	return fmt.Errorf("%w: %w", reqCtx.Err(), cause)
}
