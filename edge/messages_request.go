package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/dialect/anthropic"
	"github.com/relaydev/relay/relay/wire"
)

// messagesRequest is a POST /v1/messages (Anthropic's Messages API)
// translated for the work queue (anthropic.ToChat): the generation is a
// chat completion request, so every provider behind the relay serves it
// and the worker, its retries, continuations and takeovers stay as they
// are; the edge renders the stored frames as Anthropic's events
// (messages_events.go).
type messagesRequest struct {
	chat   chatRequest
	stream bool
}

// readMessagesRequest reads and translates a request body of at most max
// bytes.
func readMessagesRequest(w http.ResponseWriter, r *http.Request, max int64, lim limits) (messagesRequest, *wire.Error) {
	body, e := readBody(w, r, max)
	if e != nil {
		return messagesRequest{}, e
	}
	return parseMessagesRequest(body, lim)
}

// parseMessagesRequest translates a Messages request into a chat
// completion request and validates both: the Messages fields by the
// dialect, the rest by parseChatRequest, as for any chat completion, with
// the client's names in errors. An unknown model is a 404
// (not_found_error).
func parseMessagesRequest(body []byte, lim limits) (messagesRequest, *wire.Error) {
	req, e := anthropic.ToChat(body, func(model string) *wire.Error {
		if !lim.served(model) || lim.allowed != nil && !lim.allowed(model) {
			return modelNotFound(model)
		}
		return nil
	})
	if e != nil {
		return messagesRequest{}, e
	}
	creq, e := parseChatRequest(req.Body, lim)
	if e != nil {
		return messagesRequest{}, anthropic.ErrorAsSent(e)
	}
	return messagesRequest{chat: creq, stream: req.Stream}, nil
}
