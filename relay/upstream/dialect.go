package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
)

// Dialect is the API a provider speaks. Whatever the dialect, Client.Stream
// takes a chat completion request and Stream.Next yields chat-completion
// Deltas: a provider of another dialect is translated both ways, so the
// worker and the chunk log know one shape.
type Dialect string

const (
	// DialectChat is OpenAI's chat completions (POST /chat/completions),
	// which most providers imitate. The zero Dialect means it.
	DialectChat Dialect = "openai"
	// DialectAnthropic is Anthropic's Messages API (POST /messages).
	DialectAnthropic Dialect = "anthropic"
	// DialectResponses is OpenAI's Responses API (POST /responses).
	DialectResponses Dialect = "openai_responses"
)

// ErrUntranslatable means the chat request cannot be said in the provider's
// dialect (a message of an unknown role, tool arguments that are not a JSON
// object). Classify calls it a RequestFault: it fails the same way anywhere.
var ErrUntranslatable = errors.New("request cannot be translated to the provider's dialect")

// endpoint is the path, under the base URL, of the dialect's streaming call.
func (d Dialect) endpoint() string {
	switch d {
	case DialectAnthropic:
		return "/messages"
	case DialectResponses:
		return "/responses"
	}
	return "/chat/completions"
}

// URL returns the address of path under t's base URL.
func (t Target) URL(path string) string {
	return strings.TrimRight(t.BaseURL, "/") + path
}

// NewRequest returns a request to path under t's base URL, marked for h2c
// if t asks for HTTP2PriorKnowledge (see Transport). Every call to a
// provider is made by it, so that each goes over the provider's protocol.
func (t Target) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	if t.HTTP2PriorKnowledge {
		ctx = withPriorKnowledge(ctx)
	}
	return http.NewRequestWithContext(ctx, method, t.URL(path), body)
}

// setHeaders sets t's Headers, then those of its key (Authorize), which
// win.
func (t Target) setHeaders(h http.Header) {
	for k, v := range t.Headers {
		h[k] = v
	}
	t.Authorize(h)
}

// Authorize sets the headers by which t's dialect takes its key: a bearer
// token, or for Anthropic x-api-key and the API version. An empty key sends
// no credential, for local servers that need none.
func (t Target) Authorize(h http.Header) {
	if t.Dialect == DialectAnthropic {
		h.Set("anthropic-version", anthropic.Version)
		if t.APIKey != "" {
			h.Set("x-api-key", t.APIKey)
		}
		return
	}
	if t.APIKey != "" {
		h.Set("Authorization", "Bearer "+t.APIKey)
	}
}

// translate turns a chat completion request into t's dialect and returns
// the decoder of the answer's events; a nil decoder means chat chunks.
func (t Target) translate(body []byte) ([]byte, eventDecoder, error) {
	switch t.Dialect {
	case DialectAnthropic:
		out, trimmed, err := anthropic.FromChat(body)
		if err != nil {
			return nil, nil, err
		}
		return out, anthropic.NewDecoder(trimmed), nil
	case DialectResponses:
		out, err := responses.FromChat(body)
		if err != nil {
			return nil, nil, err
		}
		return out, responses.NewDecoder(), nil
	}
	return body, nil, nil
}

// eventDecoder reads the events of a dialect other than chat completions
// (anthropic.Decoder, responses.Decoder). Decode returns the chat.Delta an
// event carries, chat.ErrNoDelta for an event that carries nothing, io.EOF
// for the dialect's explicit end of stream, or an error of the stream.
type eventDecoder interface {
	Decode(event string, data []byte) (chat.Delta, error)
}
