package edge

import (
	"encoding/json"
	"net/http"

	"github.com/relaydev/relay/relay/dialect/anthropic"
)

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
	body, e = anthropic.CountTokensBody(body)
	if e != nil {
		writeError(w, e)
		return
	}
	req, e := parseMessagesRequest(body, s.limits(principalOf(r)))
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, anthropic.TokenCount{InputTokens: estimateTokens(req.chat.Body)})
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
