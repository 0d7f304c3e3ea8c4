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

// Response is a provider's 2xx answer to a forwarded request (Client.Post):
// its body is read with Read or, for an event stream, NextEvent, under the
// same stall bounds as a Stream. The caller must Close it.
type Response struct {
	// Status and ContentType are the provider's.
	Status      int
	ContentType string

	ctx    context.Context
	cancel context.CancelCauseFunc
	wd     *watchdog
	body   io.ReadCloser
	events *EventReader
	reader io.Reader
}

// Post sends body, untranslated, to t.BaseURL + path (such as
// "/embeddings") and returns the provider's answer once its headers are
// in: the endpoints the relay forwards as they are, which only OpenAI's
// dialect has. As Stream does, it returns
// a *StatusError for a non-2xx answer; a streamed request (stream) that is
// answered with a JSON body gets the provider's error (wrapping
// *chat.Error) or ErrMalformed. ctx governs the whole answer.
func (c *Client) Post(ctx context.Context, t Target, path string, body []byte, stream bool) (*Response, error) {
	reqCtx, cancel := context.WithCancelCause(ctx)
	// A forwarded answer is not parsed: only its bytes are watched.
	wd := startWatchdog(bound(c.FirstByteTimeout, DefaultFirstByteTimeout), bound(c.StallTimeout, DefaultStallTimeout), 0, cancel)
	fail := func(err error) (*Response, error) {
		wd.stop()
		cancel(nil)
		return nil, err
	}
	req, err := t.NewRequest(reqCtx, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return fail(fmt.Errorf("upstream: %s: %w", t.Provider, err))
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	t.setHeaders(req.Header)
	tracing.InjectHTTP(ctx, req.Header) // the provider continues the caller's trace
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fail(fmt.Errorf("upstream: %s: %w", t.Provider, requestErr(reqCtx, err)))
	}
	rb := &activityReader{r: resp.Body, wd: wd}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Provider: t.Provider, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header, time.Now())}
		se.Body, _ = io.ReadAll(io.LimitReader(rb, maxErrorBody))
		se.Err, _ = chat.ParseErrorBody(se.Body)
		_ = resp.Body.Close()
		return fail(se)
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, _ := mime.ParseMediaType(ct); stream && mt == "application/json" {
		b, _ := io.ReadAll(io.LimitReader(rb, maxErrorBody))
		_ = resp.Body.Close()
		if e, ok := chat.ParseErrorBody(b); ok {
			return fail(fmt.Errorf("upstream: %s: error response: %w", t.Provider, &e))
		}
		return fail(fmt.Errorf("upstream: %s: %w: JSON response instead of an event stream", t.Provider, ErrMalformed))
	}
	r := &Response{Status: resp.StatusCode, ContentType: ct, ctx: reqCtx, cancel: cancel, wd: wd, body: resp.Body, reader: rb}
	if stream {
		r.events = NewEventReader(rb, c.MaxEventSize)
	}
	return r, nil
}

// ReadAll reads the whole body, failing with ErrTooLarge past limit bytes.
func (r *Response) ReadAll(limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.reader, int64(limit)+1))
	if err != nil {
		return nil, requestErr(r.ctx, err)
	}
	if len(b) > limit {
		return nil, fmt.Errorf("upstream: %w: the answer is larger than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// ErrTooLarge: a forwarded answer exceeds what the caller can carry.
var ErrTooLarge = errors.New("answer too large")

// NextEvent returns the data of the next event of a streamed answer,
// skipping comments. It returns io.EOF after data: [DONE], ErrTruncated if
// the stream ends before it, and an error wrapping *chat.Error for an
// error payload.
func (r *Response) NextEvent() ([]byte, error) {
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, requestErr(r.ctx, err)
		}
		ev, err := r.events.Next()
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("upstream: %w", ErrTruncated)
		case err != nil:
			return nil, requestErr(r.ctx, err)
		case ev.Comment:
			continue
		case bytes.Equal(ev.Data, doneData):
			return nil, io.EOF
		}
		if bytes.Contains(ev.Data, []byte(`"error"`)) {
			if e, ok := chat.ParseErrorBody(ev.Data); ok {
				return nil, fmt.Errorf("upstream: error event: %w", &e)
			}
		}
		return ev.Data, nil
	}
}

// Close ends the call, also while a read blocks.
func (r *Response) Close() error {
	r.cancel(ErrClosed)
	r.wd.stop()
	return r.body.Close()
}
