package edge

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// chatRequest is what the edge needs to know about a chat completion
// request. The body itself is forwarded to the worker untouched, so fields
// the edge does not know (tools, response_format, ...) reach the provider.
type chatRequest struct {
	Model  string
	Stream bool
	Body   json.RawMessage
	// FailFast: fail at once rather than wait for a provider that cannot
	// take the request now (HeaderFailFast). Not part of the body.
	FailFast bool
	// RequestID is the client's X-Request-Id (startOptions), which the
	// provider's calls carry. Not part of the body.
	RequestID string
}

// limits are what a request is checked against, besides its shape.
type limits struct {
	// served reports whether the relay serves a model (the catalog).
	served func(string) bool
	// allowed reports whether the caller may use a served model.
	allowed func(string) bool
	// maxMessages and maxTokens cap messages and max_tokens; negative: no
	// cap.
	maxMessages, maxTokens int
}

// limits of a request by p.
func (s *Server) limits(p principal) limits {
	return limits{served: s.catalog.Serves, allowed: p.allows, maxMessages: s.cfg.MaxMessages, maxTokens: s.spend.maxTokensFor(p.tenant)}
}

// chat is l as the chat dialect's check takes it.
func (l limits) chat() chat.Limits {
	return chat.Limits{Served: l.served, Allowed: l.allowed, MaxMessages: l.maxMessages, MaxTokens: l.maxTokens}
}

// CodeLimitExceeded answers a request over one of the edge's limits
// (edge.max_messages, edge.max_tokens_cap).
const CodeLimitExceeded = chat.CodeLimitExceeded

// CodeUnsupportedMediaType answers a request body that is not declared
// JSON (415).
const CodeUnsupportedMediaType = "unsupported_media_type"

// checkJSONBody refuses a request body whose Content-Type is not
// application/json (parameters such as charset allowed). A browser sends
// text/plain, a form type, or none at all, cross-site and without a CORS
// preflight: accepted, any page a user of an anonymous edge visits could
// start generations on it. A page must declare JSON, which takes a
// preflight (admit_cors.go); the OpenAI and Anthropic SDKs always do. A request
// that carries a credential header took a preflight already (neither
// Authorization nor x-api-key is a header a page may send without one), so
// its body is read as JSON whatever it is labelled, as clients that call
// a provider with `curl -d` and a key expect.
func checkJSONBody(r *http.Request) *wire.Error {
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	e := invalid("", CodeUnsupportedMediaType,
		"the request body must be JSON, sent with Content-Type: application/json (got %s); with curl, add -H 'Content-Type: application/json'", strconv.Quote(ct))
	e.Status = http.StatusUnsupportedMediaType
	return e
}

// readChatRequest reads and validates a request body of at most max bytes.
func readChatRequest(w http.ResponseWriter, r *http.Request, max int64, lim limits) (chatRequest, *wire.Error) {
	body, e := readBody(w, r, max)
	if e != nil {
		return chatRequest{}, e
	}
	return parseChatRequest(body, lim)
}

// parseChatRequest checks body as a chat completion request
// (chat.CheckRequest). Nothing it refuses reaches JetStream.
func parseChatRequest(body []byte, lim limits) (chatRequest, *wire.Error) {
	c, e := chat.CheckRequest(body, lim.chat())
	if e != nil {
		return chatRequest{}, e
	}
	return chatRequest{Model: c.Model, Stream: c.Stream, Body: c.Body}, nil
}
