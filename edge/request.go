package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/relaydev/relay/relay/protocol"
)

// chatRequest is what the edge needs to know about a chat completion
// request. The body itself is forwarded to the worker untouched, so fields
// the edge does not know (tools, temperature, ...) reach the provider.
type chatRequest struct {
	Model  string
	Stream bool
	Body   json.RawMessage
}

// readChatRequest reads and validates a request body of at most max bytes.
func readChatRequest(w http.ResponseWriter, r *http.Request, max int64, served func(string) bool) (chatRequest, *protocol.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			e := invalid("", CodeBodyTooLarge, "request body exceeds %d bytes", max)
			e.Status = http.StatusRequestEntityTooLarge
			return chatRequest{}, e
		}
		return chatRequest{}, invalid("", CodeInvalidJSON, "reading request body: %v", err)
	}
	return parseChatRequest(body, served)
}

// parseChatRequest validates what the relay relies on, and names the first
// field at fault the way OpenAI does (param "messages[2].role").
func parseChatRequest(body []byte, served func(string) bool) (chatRequest, *protocol.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return chatRequest{}, invalid("", CodeInvalidJSON, "request body must be a JSON object")
	}
	req := chatRequest{Body: bytes.TrimSpace(body)}

	raw, ok := fields["model"]
	if !ok {
		return chatRequest{}, invalid("model", CodeInvalidValue, "missing required parameter: 'model'")
	}
	if json.Unmarshal(raw, &req.Model) != nil || req.Model == "" {
		return chatRequest{}, invalid("model", CodeInvalidValue, "'model' must be a non-empty string")
	}
	if !served(req.Model) {
		e := invalid("model", CodeModelNotFound, "the model %q does not exist or is not served by this relay", req.Model)
		return chatRequest{}, e
	}

	if e := checkMessages(fields["messages"]); e != nil {
		return chatRequest{}, e
	}

	if raw, ok := fields["stream"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &req.Stream) != nil {
			return chatRequest{}, invalid("stream", CodeInvalidValue, "'stream' must be a boolean")
		}
	}
	// Chunks carry a single choice (index 0).
	if raw, ok := fields["n"]; ok && !isNull(raw) {
		var n int
		if json.Unmarshal(raw, &n) != nil || n != 1 {
			return chatRequest{}, invalid("n", CodeInvalidValue, "only n=1 is supported")
		}
	}
	return req, nil
}

func checkMessages(raw json.RawMessage) *protocol.Error {
	if raw == nil {
		return invalid("messages", CodeInvalidValue, "missing required parameter: 'messages'")
	}
	var messages []json.RawMessage
	if json.Unmarshal(raw, &messages) != nil || len(messages) == 0 {
		return invalid("messages", CodeInvalidValue, "'messages' must be a non-empty array")
	}
	for i, m := range messages {
		var msg map[string]json.RawMessage
		if json.Unmarshal(m, &msg) != nil || msg == nil {
			return invalid(fmt.Sprintf("messages[%d]", i), CodeInvalidValue, "messages[%d] must be an object", i)
		}
		var role string
		if json.Unmarshal(msg["role"], &role) != nil || role == "" {
			return invalid(fmt.Sprintf("messages[%d].role", i), CodeInvalidValue, "messages[%d].role must be a non-empty string", i)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }
