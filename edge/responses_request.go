package edge

import (
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// responsesRequest is a POST /v1/responses translated for the work queue
// (responses.ParseRequest): a chat completion request, and the Responses
// request's own stream and background.
type responsesRequest struct {
	chat               chatRequest
	stream, background bool
}

// CodeUnsupportedParameter refuses a parameter the relay cannot honour
// over a chat-completions upstream, in any of the APIs it serves.
const CodeUnsupportedParameter = chat.CodeUnsupportedParameter

// parseResponsesRequest translates a Responses request into a chat
// completion request and validates both: the Responses fields by the
// dialect, with their own names in errors, the rest by parseChatRequest,
// as for any chat completion. An unknown model is a 404, as OpenAI
// answers it.
func parseResponsesRequest(body []byte, lim limits) (responsesRequest, *wire.Error) {
	req, e := responses.ParseRequest(body, func(model string) *wire.Error {
		if !lim.served(model) || lim.allowed != nil && !lim.allowed(model) {
			return modelNotFound(model)
		}
		return nil
	})
	if e != nil {
		return responsesRequest{}, e
	}
	creq, e := parseChatRequest(req.Chat, lim)
	if e != nil {
		e.Param = responses.ChatParam(e.Param)
		return responsesRequest{}, e
	}
	return responsesRequest{chat: creq, stream: req.Stream, background: req.Background}, nil
}
