package edge

import (
	"encoding/json"
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// countTokensResponse is the answer of POST /v1/messages/count_tokens.
type countTokensResponse struct {
	InputTokens int `json:"input_tokens"`
}

// handleCountTokens serves POST /v1/messages/count_tokens with an
// estimate: the relay has no tokenizer of the models behind it, so it
// counts a token per 4 bytes of the translated messages and tools, the
// usual rule of thumb for English text; a request's usage has the
// provider's own count. The request is validated as a Messages request,
// without max_tokens, which count_tokens does not take.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	fields, e := countTokensFields(body)
	if e != nil {
		writeError(w, e)
		return
	}
	req, e := parseMessagesRequest(marshal(fields), s.limits(principalOf(r)))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, countTokensResponse{InputTokens: estimateTokens(req.chat.Body)})
}

// countTokensFields are the fields of a count_tokens body as a Messages
// request's: max_tokens (which it lacks) set, stream (which it may not
// have) left out.
func countTokensFields(body []byte) (map[string]json.RawMessage, *wire.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, invalid("", CodeInvalidJSON, "request body must be a JSON object")
	}
	if _, ok := fields["stream"]; ok {
		return nil, invalid("stream", CodeUnsupportedParameter, "stream: extra inputs are not permitted")
	}
	fields["max_tokens"] = json.RawMessage("1")
	return fields, nil
}

// bytesPerToken is the estimate's rule of thumb.
const bytesPerToken = 4

// estimateTokens estimates the input tokens of a translated chat body:
// its messages and tools, rounded up.
func estimateTokens(chatBody []byte) int {
	var body struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	}
	json.Unmarshal(chatBody, &body) // the edge's own translation
	n := len(body.Messages) + len(body.Tools)
	return (n + bytesPerToken - 1) / bytesPerToken
}
